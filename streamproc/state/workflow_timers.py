"""Due dates of workflow runs: user timers and the run's own deadlines.

Two ordered families, both led by (due_ms, run key) so a range scan yields what is due
in time order:

* `workflow_timers` (due_ms, run key, timer id): timers a workflow started;
* `workflow_deadlines` (due_ms, run key, kind): the workflow task timeout, the run and
  execution timeouts and the end of a first-task backoff, one armed deadline per kind.

The run document remembers what it armed, so closing a run disarms everything.
"""

from __future__ import annotations

from streamproc.protocol.records import WorkflowIntent
from streamproc.state.db import PartitionDb, PendingWrites
from streamproc.state.families import Family
from streamproc.state.keys import read_time_key, time_key, time_upper_bound
from streamproc.state.workflow_run import WorkflowRun
from streamproc.state.workflow_run_parts import RunTimer

_TIME_KEY_BYTES = 16
#: Enum members looked up once (a member's lookup on its class is a Python call per use).
_DEADLINES = Family.WORKFLOW_DEADLINES


def _timer_key(due_ms: int, run_key: int, timer_id: str) -> bytes:
    return time_key(due_ms, run_key) + timer_id.encode()


def deadline_key(due_ms: int, run_key: int, kind: str) -> bytes:
    return time_key(due_ms, run_key) + kind.encode()


class WorkflowTimers:
    """Arming and disarming, for processors; `run` is updated to match."""

    def __init__(self, writes: PendingWrites) -> None:
        self._w = writes

    def start_timer(self, run_key: int, run: WorkflowRun, timer_id: str, due_ms: int, started_event_id: int) -> None:
        self._w.put(Family.WORKFLOW_TIMERS, _timer_key(due_ms, run_key, timer_id), b"")
        run.timers[timer_id] = RunTimer(due_ms, started_event_id)

    def remove_timer(self, run_key: int, run: WorkflowRun, timer_id: str) -> RunTimer:
        timer = run.timers.pop(timer_id)
        self._w.delete(Family.WORKFLOW_TIMERS, _timer_key(timer.due_ms, run_key, timer_id))
        return timer

    def arm(self, run_key: int, run: WorkflowRun, kind: str, due_ms: int) -> None:
        """Make `due_ms` the run's deadline of this kind (replacing an earlier one)."""
        self.disarm(run_key, run, kind)
        self._w.put(_DEADLINES, deadline_key(due_ms, run_key, kind), b"")
        run.deadlines[kind] = due_ms

    def disarm(self, run_key: int, run: WorkflowRun, kind: str) -> None:
        due_ms = run.deadlines.pop(kind, None)
        if due_ms is not None:
            self._w.delete(_DEADLINES, deadline_key(due_ms, run_key, kind))

    def disarm_all(self, run_key: int, run: WorkflowRun) -> None:
        """The run closed: no deadline and no timer of it may fire any more."""
        for kind in list(run.deadlines):
            self.disarm(run_key, run, kind)
        for timer_id in list(run.timers):
            self.remove_timer(run_key, run, timer_id)


class WorkflowDueDates:
    """Read-only view of committed workflow due dates, for the checker."""

    def __init__(self, db: PartitionDb) -> None:
        self._db = db

    def timers(self, now_ms: int, limit: int) -> list[tuple[int, int, str]]:
        """(due_ms, run key, timer id) of timers due now or earlier, in time order."""
        return self._due(Family.WORKFLOW_TIMERS, now_ms, limit)

    def deadlines(self, now_ms: int, limit: int) -> list[tuple[int, int, str]]:
        """(due_ms, run key, kind) of run deadlines due now or earlier, in time order."""
        return self._due(Family.WORKFLOW_DEADLINES, now_ms, limit)

    def any_task_out(self) -> bool:
        """Whether some run has a workflow task out (its task timeout is armed)."""
        kind = WorkflowIntent.TASK_TIME_OUT.value.encode()
        return any(key[_TIME_KEY_BYTES:] == kind for key, _ in self._db.scan(Family.WORKFLOW_DEADLINES))

    def next_due_ms(self) -> int | None:
        times = [read_time_key(first[:_TIME_KEY_BYTES])[0]
                 for family in (Family.WORKFLOW_TIMERS, Family.WORKFLOW_DEADLINES)
                 if (first := self._db.first_key(family)) is not None]
        return min(times) if times else None

    def _due(self, family: Family, now_ms: int, limit: int) -> list[tuple[int, int, str]]:
        out = []
        for key, _ in self._db.scan(family, time_upper_bound(now_ms + 1), limit):
            due_ms, run_key = read_time_key(key[:_TIME_KEY_BYTES])
            out.append((due_ms, run_key, key[_TIME_KEY_BYTES:].decode()))
        return out
