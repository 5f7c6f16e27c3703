"""What keeps a task a worker took from being stranded: a confirmed START, and a worker that
gives its partitions up while it cannot run what they hold.

A task record is not a lease. Kafka hands a partition to one member of the queue's group
for as long as it polls, however stuck its handlers are, and a timed-out attempt is
republished on the same partition (tasks are routed by key). So two rules, shared by the
job and the activity worker:

1. **A task is settled only by the engine's answer to its START** (`confirm_start`):
   accepted or refused. Until then its offset is not committed (`TaskOffsets`), so a
   worker killed before its START landed leaves the task to the partition's next owner.
   A START with no answer is sent again, with the same request id, until an answer
   comes: during a broker outage the worker waits instead of giving the task up. The
   first answer decides (a copy that arrives after an accepted one is refused by the
   engine, and that refusal is ignored).

2. **A worker with an overdue attempt leaves the group** if another member can take its
   partitions (`OverdueAttempts` here and `task_queue_membership`). An attempt still running past its deadline (the job's
   timeout, an activity's start-to-close or heartbeat timeout, counted from when the
   START was sent, so never later than the engine's) has been timed out by the engine,
   which republished the next attempt on a partition this worker owns. A worker that
   cannot finish what it started will not finish that one either: it unsubscribes, its
   partitions move to a healthy member within a rebalance (seconds, not
   `max.poll.interval.ms`), and it rejoins once no attempt of it is overdue. A healthy
   worker whose handler merely overran leaves the group for as long as it overruns;
   that is the price of never sending a retry back to a stuck worker.

Temporal's matching service has neither problem (it hands a task only to a poller with a
free slot, and a retry to whichever poller asks); on Kafka these two rules give the same
guarantee: every attempt either runs on a live worker or comes back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout

import structlog

from streamproc.protocol.records import Record
from streamproc.kafka.replies import Reply, ReplyListener

log = structlog.get_logger("streamproc.worker")

#: How long a START waits for its answer before the same command is sent again.
START_RESEND_S = 5.0


def confirm_start(replies: ReplyListener, request_id: str, send: Callable[[], None],
                  stop: threading.Event, resend_s: float = START_RESEND_S) -> Reply | None:
    """Send a START (with `send`, which names `request_id` and our replies partition) and
    wait for the engine's first answer, sending it again every `resend_s` seconds while
    none comes. None when the worker stops first: the task stays unsettled."""
    answer: Future[Reply] = replies.first_reply(request_id, ttl_s=24 * 3600)
    copies = 0
    try:
        while not stop.is_set():
            if copies:
                log.warning("task_start_unanswered_resending", request_id=request_id, copies=copies,
                            waited_s=round(copies * resend_s, 1))
            send()
            copies += 1
            try:
                return answer.result(resend_s)
            except FutureTimeout:
                continue
        return None
    finally:
        if not answer.done():
            replies.forget(request_id)


class PendingStarts:
    """STARTs sent and not answered yet, without a thread waiting on each (a job worker has
    many in flight: one engine round trip each would otherwise bound its throughput).

    An answer arrives on the replies listener's thread and goes to the `on_answer` given
    with the START; `resend_due()`, called by the polling thread, sends again, with the
    same request id, every START unanswered for `resend_s`, and says so in one line.
    """

    def __init__(self, replies: ReplyListener, send: Callable[[Record], None], resend_s: float = START_RESEND_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._replies = replies
        self._send = send
        self._resend_s = resend_s
        self._clock = clock
        self._lock = threading.Lock()
        #: request id -> (the START, when its last copy was sent, copies sent)
        self._pending: dict[str, tuple[Record, float, int]] = {}

    def start(self, command: Record, on_answer: Callable[[Reply], None]) -> None:
        """Send `command` (a START naming a request id and our replies partition)."""
        request_id = command.request_id

        def answered(reply: Reply) -> bool:
            with self._lock:
                if self._pending.pop(request_id, None) is None:
                    return True  # a later copy's answer: the first one decided
            on_answer(reply)
            return True

        with self._lock:
            self._pending[request_id] = (command, self._clock(), 1)
        self._replies.expect(request_id, answered, ttl_s=24 * 3600)
        self._send(command)

    def resend_due(self) -> None:
        now = self._clock()
        with self._lock:
            due = [(rid, cmd, copies) for rid, (cmd, sent, copies) in self._pending.items()
                   if now - sent >= self._resend_s]
            for rid, cmd, copies in due:
                self._pending[rid] = (cmd, now, copies + 1)
        if due:
            log.warning("task_starts_unanswered_resending", starts=len(due), most_copies=max(c for _, _, c in due) + 1)
        for _, cmd, _ in due:
            self._send(cmd)

    def __len__(self) -> int:
        with self._lock:
            return len(self._pending)


class OverdueAttempts:
    """The attempts running on this worker, each with the time the engine gives up on it."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        #: attempt -> (monotonic deadline, what to call it in a log line)
        self._deadlines: dict[object, tuple[float, str]] = {}

    def begin(self, attempt: object, timeout_s: float | None, name: str, sent_at: float | None = None) -> None:
        """`attempt` started; the engine times it out `timeout_s` after its START was sent
        (`sent_at`, a `time.monotonic()` reading; default now). None: no deadline."""
        if timeout_s is None:
            return
        with self._lock:
            self._deadlines[attempt] = ((sent_at if sent_at is not None else self._clock()) + timeout_s, name)

    def extend(self, attempt: object, deadline: float) -> None:
        """A heartbeat moved the attempt's deadline (never past one already set further)."""
        with self._lock:
            if attempt in self._deadlines:
                _, name = self._deadlines[attempt]
                self._deadlines[attempt] = (deadline, name)

    def end(self, attempt: object) -> None:
        with self._lock:
            self._deadlines.pop(attempt, None)

    def overdue(self) -> list[str]:
        """Names of the attempts past their deadline."""
        now = self._clock()
        with self._lock:
            return sorted(name for deadline, name in self._deadlines.values() if now >= deadline)
