"""What the checker watches: one source per due-date family, each turning due items into commands.

An item is the identity of one due date (the intent, its time and the entity key): the
checker remembers the items whose command is in flight, and `item_of` recognises the
command when the processor has handled it.

When an item is due depends on whose semantics it follows: a job's deadline or backoff
passes strictly after its time (Zeebe: `deadline < now`, SEMANTICS.md 10), and so does a
job stream's lease; an activity's or a workflow's timer fires at its time (Temporal:
`now >= fire time`).
"""

from __future__ import annotations

from typing import Protocol

from streamproc.protocol.records import (
    ActivityIntent,
    JobIntent,
    JobStreamIntent,
    Record,
    ScheduleIntent,
    ValueType,
    WorkflowIntent,
)
from streamproc.state.activities import ActivityTimers
from streamproc.state.job_streams import JobStreamLeases
from streamproc.state.jobs import JobDueDates
from streamproc.state.schedules import ScheduleDueDates
from streamproc.state.workflow_timers import WorkflowDueDates

Item = tuple[str, str, int, int]  # (value type, intent, due_ms, key)

# Read once: on Python 3.11 an Enum class attribute costs a round trip through EnumType's
# __getattr__ hook, and `item_of` runs for every command a partition processes.
_JOB, _ACTIVITY_TASK, _WORKFLOW, _SCHEDULE = ValueType.JOB, ValueType.ACTIVITY_TASK, ValueType.WORKFLOW, ValueType.SCHEDULE
_TRIGGER = ScheduleIntent.TRIGGER
_JOB_STREAM, _EXPIRE = ValueType.JOB_STREAM, JobStreamIntent.EXPIRE


class DueSource(Protocol):
    #: The value type of its commands (the checker asks only the sources of a command's type).
    value_type: str
    #: Whether its due dates end a wait (`due/waiting.py`): time skipping may jump to them.
    ends_a_wait: bool

    def next_fire_ms(self) -> int | None:
        """The earliest time (ms) at which `due` will return something, or None."""


    def due(self, now_ms: int, limit: int) -> list[tuple[Item, Record]]: ...

    def item_of(self, command: Record) -> Item | None: ...


class JobDueSource:
    """Job timeouts (TIME_OUT) and ends of retry backoffs (RECUR_AFTER_BACKOFF)."""

    value_type = _JOB
    ends_a_wait = True

    def __init__(self, due_dates: JobDueDates) -> None:
        self._due = due_dates

    def next_fire_ms(self) -> int | None:
        due = self._due.next_due_ms()
        return None if due is None else due + 1  # strictly after

    def due(self, now_ms: int, limit: int) -> list[tuple[Item, Record]]:
        out = []
        for deadline, key in self._due.timed_out(now_ms, limit):
            out.append(((ValueType.JOB, JobIntent.TIME_OUT, deadline, key),
                        Record.command(ValueType.JOB, JobIntent.TIME_OUT, {"deadline_ms": deadline}, key=key)))
        for recur_at, key in self._due.backoff_over(now_ms, limit):
            out.append(((ValueType.JOB, JobIntent.RECUR_AFTER_BACKOFF, recur_at, key),
                        Record.command(ValueType.JOB, JobIntent.RECUR_AFTER_BACKOFF,
                                       {"recur_at_ms": recur_at}, key=key)))
        return out

    def item_of(self, command: Record) -> Item | None:
        if command.value_type != _JOB:
            return None
        if command.intent == JobIntent.TIME_OUT:
            return (ValueType.JOB, JobIntent.TIME_OUT, command.value["deadline_ms"], command.key)
        if command.intent == JobIntent.RECUR_AFTER_BACKOFF:
            return (ValueType.JOB, JobIntent.RECUR_AFTER_BACKOFF, command.value["recur_at_ms"], command.key)
        return None


class _DueAtItsTime:
    """A source whose items are due at their time (Temporal's timers: `now >= fire time`)."""

    ends_a_wait = True

    def __init__(self, due_dates: ActivityTimers | WorkflowDueDates | ScheduleDueDates) -> None:
        self._due = due_dates

    def next_fire_ms(self) -> int | None:
        return self._due.next_due_ms()


class ActivityDueSource(_DueAtItsTime):
    """Activity timers: a timeout (TIME_OUT) or the end of a retry backoff (DISPATCH)."""

    value_type = _ACTIVITY_TASK

    _due: ActivityTimers

    def due(self, now_ms: int, limit: int) -> list[tuple[Item, Record]]:
        out = []
        for due_ms, key in self._due.due(now_ms, limit):
            timer = self._due.timer_of(key)
            if timer is None or timer[0] != due_ms:
                continue  # the index and the activity disagree only inside a batch; skip
            _, kind, timeout_type, attempt = timer
            value = {"timer_due_ms": due_ms, "timeout_type": timeout_type, "attempt": attempt}
            out.append(((ValueType.ACTIVITY_TASK, kind, due_ms, key),
                        Record.command(ValueType.ACTIVITY_TASK, kind, value, key=key)))
        return out

    def item_of(self, command: Record) -> Item | None:
        if command.value_type != _ACTIVITY_TASK or command.intent not in (
                ActivityIntent.TIME_OUT, ActivityIntent.DISPATCH):
            return None
        return (ValueType.ACTIVITY_TASK, command.intent, command.value["timer_due_ms"], command.key)


class WorkflowDueSource(_DueAtItsTime):
    """Workflow timers (TIMER_FIRE) and run deadlines (TASK_TIME_OUT, RUN_TIME_OUT,
    EXECUTION_TIME_OUT, BACKOFF_START: the deadline's kind is the command's intent)."""

    value_type = _WORKFLOW

    _due: WorkflowDueDates

    def due(self, now_ms: int, limit: int) -> list[tuple[Item, Record]]:
        out = []
        for due_ms, run_key, timer_id in self._due.timers(now_ms, limit):
            # Two timers of a run may fall due at the same ms: the timer id keeps them apart.
            out.append(((ValueType.WORKFLOW, f"{WorkflowIntent.TIMER_FIRE}/{timer_id}", due_ms, run_key),
                        Record.command(ValueType.WORKFLOW, WorkflowIntent.TIMER_FIRE,
                                       {"timer_id": timer_id, "due_ms": due_ms}, key=run_key)))
        for due_ms, run_key, kind in self._due.deadlines(now_ms, limit):
            out.append(((ValueType.WORKFLOW, kind, due_ms, run_key),
                        Record.command(ValueType.WORKFLOW, kind, {"due_ms": due_ms}, key=run_key)))
        return out

    def item_of(self, command: Record) -> Item | None:
        if command.value_type != _WORKFLOW:
            return None
        if command.intent == WorkflowIntent.TIMER_FIRE:
            return (ValueType.WORKFLOW, f"{WorkflowIntent.TIMER_FIRE}/{command.value['timer_id']}",
                    command.value["due_ms"], command.key)
        if command.intent in _WORKFLOW_DEADLINES:
            return (ValueType.WORKFLOW, command.intent, command.value["due_ms"], command.key)
        return None


class ScheduleDueSource(_DueAtItsTime):
    """Schedules whose next action time came (TRIGGER, at the time: Temporal's timers fire
    at their time)."""

    value_type = _SCHEDULE

    _due: ScheduleDueDates

    def due(self, now_ms: int, limit: int) -> list[tuple[Item, Record]]:
        return [((_SCHEDULE, schedule_id, due_ms, -1),
                 Record.command(_SCHEDULE, _TRIGGER,
                                {"schedule_id": schedule_id, "due_ms": due_ms}))
                for due_ms, schedule_id in self._due.due(now_ms, limit)]

    def item_of(self, command: Record) -> Item | None:
        if command.value_type != _SCHEDULE or command.intent != _TRIGGER:
            return None
        return (_SCHEDULE, command.value["schedule_id"], command.value["due_ms"], -1)


_WORKFLOW_DEADLINES = frozenset({WorkflowIntent.TASK_TIME_OUT, WorkflowIntent.RUN_TIME_OUT,
                                 WorkflowIntent.EXECUTION_TIME_OUT, WorkflowIntent.BACKOFF_START})


class JobStreamDueSource:
    """Job stream leases not renewed (EXPIRE, strictly after the lease's end, as a job's
    deadline). A lease is no wait: time skipping does not jump to its end (a stream expired
    under a skipped clock registers again at its next RENEW)."""

    value_type = _JOB_STREAM
    ends_a_wait = False

    def __init__(self, leases: JobStreamLeases) -> None:
        self._leases = leases

    def next_fire_ms(self) -> int | None:
        end = self._leases.next_end_ms()
        return None if end is None else end + 1  # strictly after

    def due(self, now_ms: int, limit: int) -> list[tuple[Item, Record]]:
        return [((_JOB_STREAM, f"{_EXPIRE}/{queue}/{stream_id}", lease_until, -1),
                 Record.command(_JOB_STREAM, _EXPIRE,
                                {"queue": queue, "stream_id": stream_id, "lease_until_ms": lease_until}))
                for lease_until, queue, stream_id in self._leases.expired(now_ms, limit)]

    def item_of(self, command: Record) -> Item | None:
        if command.value_type != _JOB_STREAM or command.intent != _EXPIRE:
            return None
        v = command.value
        return (_JOB_STREAM, f"{_EXPIRE}/{v['queue']}/{v['stream_id']}", v["lease_until_ms"], -1)
