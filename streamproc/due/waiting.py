"""Whether a partition is only waiting, and for when: what the time-skipping test
environment asks before it moves its clock.

Work in progress: a workflow task out (its task timeout is armed), an activity attempt
dispatched to its task queue or running, a job on its task queue or started. Each waits
for a worker, not for time. Every due date left then ends a wait: a workflow timer, an
activity's or a job's retry backoff, a first-task backoff (cron, start delay), a run or
execution timeout, a schedule's next action. A partition with no work in progress only
waits, and moving its clock to its next due date brings that wait to its end sooner;
moving it while work is in progress would time the work out or let a timer win a race
the work would have won. A job stream's lease ends no wait (a worker renews it while it
lives), so the checker leaves it out of the due date asked here (`next_wait_ms`).
"""

from __future__ import annotations

from dataclasses import dataclass

from streamproc.state.activities import ActivityTimers
from streamproc.state.db import PartitionDb
from streamproc.state.jobs import JobDueDates
from streamproc.state.workflow_timers import WorkflowDueDates


@dataclass(frozen=True, slots=True)
class Outlook:
    #: Some work is in progress: its time must run as it does.
    busy: bool
    #: The earliest due date (ms), or None when nothing is due ever.
    next_due_ms: int | None


def busy(db: PartitionDb) -> bool:
    """Whether the partition's committed state has work in progress (see the module doc)."""
    return (WorkflowDueDates(db).any_task_out() or ActivityTimers(db).any_attempt_out()
            or JobDueDates(db).any_out())


def combined(outlooks: list[Outlook]) -> Outlook:
    """The outlook of several partitions: busy if one is, due at the earliest."""
    times = [o.next_due_ms for o in outlooks if o.next_due_ms is not None]
    return Outlook(any(o.busy for o in outlooks), min(times) if times else None)
