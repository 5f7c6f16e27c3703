"""A live workflow task while its local activities run: started on the worker's runner,
each outcome fed back to the code as soon as it is known, until none is left.

Stepping never blocks, so a worker can keep the tasks of many runs in this state at once
and wait for all their activities together (`jobs`, `heartbeat_at`). A task whose calls
are still running at `heartbeat_at` (80% of its timeout, as in Temporal, and at most
30 s so the worker's consumer is polled well within Kafka's poll interval) is answered
as it stands with a request for a new task: a workflow task heartbeat. The calls run on,
and the run's next task carries on with them.

With `checkpoint`, every local activity's marker is on the log before the next call
runs, as a journaled step of Restate is. As soon as an outcome leaves the code waiting on
another call, the markers not journaled yet are sent (JOURNAL_MARKERS, through `journal`)
and the next call starts once the broker has them; the engine keeps them with the run for
an attempt after this one, should this one not complete (`engine/workflows/
journaled_markers.py`). The task's answer carries every marker and is what history
records, so a journal the engine refused loses nothing but its head start. Where a journal
cannot be used (no `journal`, the task issued a command other than a marker, which must
stay before the markers that follow it, the code read the task's time, a delivery that
failed, or the task journaled `MAX_JOURNALED` markers or `MAX_JOURNALED_BYTES` already)
the task is answered instead, asking for a new one: a task per step. Without `checkpoint`
(Temporal's way) the markers of a task are written when it completes.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable
from typing import Any

import orjson
from streamproc.workflow.commands import Command
from streamproc.workflow.local_activity_markers import is_local_activity_marker_command
from streamproc.workflow.local_activity_runner import LocalActivityRunner
from streamproc.workflow.runtime import WorkflowRuntime

__all__ = ["LiveLocalActivities"]

HEARTBEAT_SHARE = 0.8
MAX_HEARTBEAT_INTERVAL_S = 30.0
_DEFAULT_TASK_TIMEOUT_MS = 10_000
#: Markers, and bytes of their details, a task journals at most before it is answered
#: (which writes them): the engine keeps a run's journaled markers in its document, written
#: again at every journal, and refuses more than the payload limit (256 KiB by default).
MAX_JOURNALED = 64
MAX_JOURNALED_BYTES = 128 * 1024

#: Sends markers to the log for the task (JOURNAL_MARKERS), naming how many it journaled
#: before: a future the broker's answer settles (True: on the log), or None if they could
#: not be sent.
Journal = Callable[[list[Command], int], "concurrent.futures.Future[bool] | None"]


class LiveLocalActivities:
    def __init__(self, runtime: WorkflowRuntime, runner: LocalActivityRunner, scheduled: dict[str, Any],
                 checkpoint: bool = False, journal: Journal | None = None,
                 journaled: list[dict[str, Any]] = ()) -> None:
        self._runtime = runtime
        self._runner = runner
        self._checkpoint = checkpoint
        self._journal = journal if checkpoint else None
        #: Sequence numbers of the markers journaled (`journaled`: the details of those an
        #: attempt before this one journaled), their details' bytes, and the journal the
        #: broker has not answered.
        self._journaled: set[str] = {str(details.get("seq")) for details in journaled}
        self._journaled_bytes = sum(len(orjson.dumps(details)) for details in journaled)
        self.journal_in_flight: concurrent.futures.Future[bool] | None = None
        timeout_ms = (scheduled.get("attributes") or {}).get("start_to_close_timeout_ms") or _DEFAULT_TASK_TIMEOUT_MS
        #: When the task must be answered even if calls are still running (monotonic seconds).
        self.heartbeat_at = time.monotonic() + min(timeout_ms * HEARTBEAT_SHARE / 1000, MAX_HEARTBEAT_INTERVAL_S)
        #: Whether the answer is a heartbeat (calls still running).
        self.heartbeat = False
        #: The task's commands so far.
        self.commands: list[Command] = []

    def step(self, commands: list[Command]) -> list[Command] | None:
        """Feed the code every outcome known now; the task's commands once it can be
        answered, or None while its calls run."""
        self.commands = commands
        runtime, local = self._runtime, self._runtime.local_activities
        while local.pending and not runtime.closed and runtime.task_failure is None:
            if self.journal_in_flight is not None and not self._journal_landed():
                if self.journal_in_flight is not None and time.monotonic() < self.heartbeat_at:
                    return None  # the next call starts once the broker has the markers
                self.heartbeat = True  # it failed, or the heartbeat is due: answer the task
                break
            for call in local.to_start():
                call.job = self._runner.start(call.request)
            done = [(seq, call.job) for seq, call in local.pending.items()
                    if call.job.done() and not call.job.cancelled()]  # in the order of the calls
            if not done:
                if time.monotonic() < self.heartbeat_at:
                    return None
                self.heartbeat = True
                break
            for seq, job in done:
                self.commands = runtime.resolve_local_activity(seq, job.result())
            if self._checkpoint and local.to_start() and not runtime.closed and runtime.task_failure is None:
                if self._send_journal():
                    continue
                self.heartbeat = True  # the markers so far go to the log before the next call runs
                break
        return self.commands

    def _send_journal(self) -> bool:
        """Send the markers not journaled yet; False where a journal cannot be used."""
        if self._journal is None or len(self._journaled) >= MAX_JOURNALED:
            return False
        if self._runtime.time_read:
            # The code read the task's time: a retried attempt would read another one and
            # could call other things after the journaled steps. A task a step keeps each
            # step with the time it ran under.
            return False
        new = []
        size = self._journaled_bytes
        for command in self.commands:
            if not is_local_activity_marker_command(command):
                return False  # it must stay before the markers that follow it
            seq = str(command["details"].get("seq"))
            if seq not in self._journaled:
                new.append((seq, command))
                size += len(orjson.dumps(command["details"]))
        if not new or size > MAX_JOURNALED_BYTES:
            return False
        landed = self._journal([command for _, command in new], len(self._journaled))
        if landed is None:
            self._journal = None
            return False
        self._journaled.update(seq for seq, _ in new)
        self._journaled_bytes = size
        self.journal_in_flight = landed
        return True

    def _journal_landed(self) -> bool:
        """Whether the journal in flight is on the log (then it is over); a failed one
        stops journaling, and the task is answered with its markers instead."""
        landed = self.journal_in_flight
        if not landed.done():
            return False
        self.journal_in_flight = None
        if not landed.result():
            self._journal = None
            return False
        return True

    def jobs(self) -> list[concurrent.futures.Future[Any]]:
        """What the task waits on: its running calls, and the journal the broker has not answered."""
        if self.journal_in_flight is not None:
            # Nothing goes on before the broker's answer: a call done meanwhile waits for it.
            return [self.journal_in_flight]
        return [call.job for call in self._runtime.local_activities.pending.values() if call.job is not None]

    def ready(self) -> bool:
        """Whether stepping now gets anywhere: what it waits on is done, a call waits to be
        started, or the heartbeat is due."""
        return (time.monotonic() >= self.heartbeat_at or any(job.done() for job in self.jobs())
                or (self.journal_in_flight is None and bool(self._runtime.local_activities.to_start())))

    def wait(self) -> None:
        """Block until a call ends or the heartbeat is due."""
        concurrent.futures.wait(self.jobs(), timeout=max(self.heartbeat_at - time.monotonic(), 0),
                                return_when=concurrent.futures.FIRST_COMPLETED)
