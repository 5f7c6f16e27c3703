"""Notices an engine loop that stopped making progress, says why, and asks for new clients.

The loop marks what it is doing (`Progress.stage`) and when it last finished a step;
the recovery marks since when commits have been failing. A thread looks at both once a
second and, while the loop is stuck in one stage or failing, logs one `engine_stalled`
line per interval with the stage, for how long, and the last error. Every wait of the
engine is bounded, so a stuck stage is a bound missing or a client wedged inside a call;
either way, after `rebuild_after_s` it asks the loop to replace its Kafka clients
(`rebuild_requested`), which the loop does at its next recovery or step.

It asks sooner when the broker is back and the engine is not. After a broker stalled (its
JVM silent for 26 s and then 31 s right after a restart, in CI), the engine's clients were
seen failing for seconds to minutes after the broker answered again: a consumer's group
coordinator connection still waiting out its ApiVersion request, an init_transactions
queued for a coordinator and never sent; new clients worked at once. So while the loop has
been failing (not merely slow) for `broker_probe_after_s`, the watchdog asks a client of its own, made for
the question, whether the broker answers; once it has answered for
`rebuild_when_answering_s` while the loop still fails, the clients are replaced.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from streamproc.kafka.fault_policy import FaultPolicy

log = structlog.get_logger("streamproc.engine")


@dataclass
class Progress:
    """Written by the engine loop (cheap attribute writes), read by the watchdog."""

    stage: str = "starting"
    #: monotonic time the loop last finished a step
    step_at: float = field(default_factory=time.monotonic)
    #: monotonic time of the first failure since the last committed transaction, or None
    failing_since: float | None = None
    attempts: int = 0
    last_error: str = ""
    #: set by the watchdog, cleared by the engine once its clients are new
    rebuild_requested: bool = False


class Watchdog:
    def __init__(self, progress: Progress, owned: Callable[[], list[int]], policy: FaultPolicy,
                 clock: Callable[[], float] = time.monotonic,
                 broker_answers: Callable[[], bool] | None = None) -> None:
        """`broker_answers`: whether the broker answers a new client now (blocks a few seconds
        at most); None: never asked."""
        self.progress = progress
        self._owned = owned
        #: its bounds: `stall_after_s`, `stall_log_interval_s`, `rebuild_after_s`
        self.policy = policy
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._logged_at: float | None = None
        #: when the stall that a rebuild was last asked for began (one request per stall and bound)
        self._rebuilt_for: float | None = None
        self._broker_answers = broker_answers
        self._probed_at: float | None = None
        #: since when the broker answers the watchdog's own client during this stall
        self._answering_since: float | None = None
        #: a rebuild was asked for because the broker answers (once per answering period)
        self._rebuilt_answering = False

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="engine-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self.check()

    def stall(self, now: float) -> tuple[str, float] | None:
        """(reason, since) if the loop is not making progress, else None."""
        p = self.progress
        if p.failing_since is not None and now - p.failing_since >= self.policy.stall_after_s:
            return "commits_failing", p.failing_since
        if now - p.step_at >= self.policy.stall_after_s:
            return "step_not_finishing", p.step_at
        return None

    def check(self) -> None:
        """One look; logs at most one line per interval, and asks for a rebuild once per bound."""
        now = self._clock()
        self._rebuild_if_broker_answers(now)
        stall = self.stall(now)
        if stall is None:
            self._logged_at = None
            return
        reason, since = stall
        p = self.progress
        if self._logged_at is None or now - self._logged_at >= self.policy.stall_log_interval_s:
            self._logged_at = now
            log.warning("engine_stalled", reason=reason, stage=p.stage, seconds=round(now - since, 1),
                        attempts=p.attempts, error=p.last_error, partitions=self._owned())
        stuck_for = now - since
        bound = self.policy.rebuild_after_s
        if stuck_for >= bound and (self._rebuilt_for is None or now - self._rebuilt_for >= bound):
            self._rebuilt_for = now
            p.rebuild_requested = True
            log.warning("engine_clients_rebuild_requested", reason=reason, stage=p.stage, seconds=round(stuck_for, 1))

    def _rebuild_if_broker_answers(self, now: float) -> None:
        """Ask for new clients once the broker has answered our own client for
        `rebuild_when_answering_s` while the loop still fails (see the module). Only failing:
        a step that takes long (a big restore) with the broker answering is work, not a wedge."""
        policy, p = self.policy, self.progress
        failing_for = 0.0 if p.failing_since is None else now - p.failing_since
        if self._broker_answers is None or failing_for < policy.broker_probe_after_s:
            self._probed_at = self._answering_since = None
            self._rebuilt_answering = False
            return
        if self._probed_at is not None and now - self._probed_at < policy.broker_probe_interval_s:
            return
        self._probed_at = now
        if not self._broker_answers():
            self._answering_since = None
            self._rebuilt_answering = False
            return
        if self._answering_since is None:
            self._answering_since = now
        answering_for = now - self._answering_since
        if answering_for >= policy.rebuild_when_answering_s and not self._rebuilt_answering:
            self._rebuilt_answering = True
            p.rebuild_requested = True
            log.warning("engine_clients_rebuild_requested", reason="commits_failing", stage=p.stage,
                        seconds=round(failing_for, 1), broker_answering_s=round(answering_for, 1))
