"""A live workflow task while its local activities run: started on the worker's runner,
each outcome fed back to the code as soon as it is known, until none is left.

Stepping never blocks, so a worker can keep the tasks of many runs in this state at once
and wait for all their activities together (`jobs`, `heartbeat_at`). A task whose calls
are still running at `heartbeat_at` (80% of its timeout, as in Temporal, and at most
30 s so the worker's consumer is polled well within Kafka's poll interval) is answered
as it stands with a request for a new task: a workflow task heartbeat. The calls run on,
and the run's next task carries on with them.

With `checkpoint`, a task is also answered (asking for a new one) as soon as an outcome
leaves the code waiting on another call, before that call starts: every local activity's
marker is on the log before the next one runs, as a journaled step of Restate is. It
costs a task per step; without it (Temporal's way) the markers of a task are written
when it completes.
"""

from __future__ import annotations

import concurrent.futures
import time
from typing import Any

from streamproc.workflow.commands import Command
from streamproc.workflow.local_activity_runner import LocalActivityRunner
from streamproc.workflow.runtime import WorkflowRuntime

__all__ = ["LiveLocalActivities"]

HEARTBEAT_SHARE = 0.8
MAX_HEARTBEAT_INTERVAL_S = 30.0
_DEFAULT_TASK_TIMEOUT_MS = 10_000


class LiveLocalActivities:
    def __init__(self, runtime: WorkflowRuntime, runner: LocalActivityRunner, scheduled: dict[str, Any],
                 checkpoint: bool = False) -> None:
        self._runtime = runtime
        self._runner = runner
        self._checkpoint = checkpoint
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
                self.heartbeat = True  # the markers so far go to the log before the next call runs
                break
        return self.commands

    def jobs(self) -> list[concurrent.futures.Future[dict[str, Any]]]:
        return [call.job for call in self._runtime.local_activities.pending.values() if call.job is not None]

    def wait(self) -> None:
        """Block until a call ends or the heartbeat is due."""
        concurrent.futures.wait(self.jobs(), timeout=max(self.heartbeat_at - time.monotonic(), 0),
                                return_when=concurrent.futures.FIRST_COMPLETED)
