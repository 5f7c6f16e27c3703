"""A run's event history: is it well-formed (SEMANTICS.md 6.2)?

:func:`check_well_formed` is what tests use to assert that whatever the engine wrote, a
crash and a recovery included, still reads like a history Temporal would have written.
Event types live in :mod:`~streamproc.semantics.workflow_events` and history limits in
:mod:`~streamproc.semantics.workflow_history_limits`; both are re-exported here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from streamproc.semantics.enums import TimeoutType
from streamproc.semantics.workflow_events import (
    CLOSE_EVENT_TYPES,
    COMMAND_EVENT_TYPES,
    EventType,
)

__all__ = ["HistoryEvent", "check_well_formed"]

#: One history event: ``(event_id, event_type, attributes)``.
HistoryEvent = tuple[int, EventType, Mapping[str, Any]]

_E = EventType

# Not commands, but written inside a command batch: cancelling an activity that never
# started closes it at once, and update outcomes travel with the task's messages.
_BATCH_COMPANIONS = frozenset(
    {
        _E.ACTIVITY_TASK_CANCELED,
        _E.WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
        _E.WORKFLOW_EXECUTION_UPDATE_REJECTED,
        _E.WORKFLOW_EXECUTION_UPDATE_COMPLETED,
    }
)

_WORKFLOW_TASK_ENDS = frozenset(
    {_E.WORKFLOW_TASK_COMPLETED, _E.WORKFLOW_TASK_FAILED, _E.WORKFLOW_TASK_TIMED_OUT}
)
_WORKFLOW_TASK_EVENTS = _WORKFLOW_TASK_ENDS | {
    _E.WORKFLOW_TASK_SCHEDULED,
    _E.WORKFLOW_TASK_STARTED,
}

_ACTIVITY = "ActivityTaskScheduled"
_TIMER = "TimerStarted"
_CHILD = "StartChildWorkflowExecutionInitiated"
_SIGNAL = "SignalExternalWorkflowExecutionInitiated"
_CANCEL = "RequestCancelExternalWorkflowExecutionInitiated"
_SCHEDULED, _STARTED, _INITIATED = "scheduled_event_id", "started_event_id", "initiated_event_id"

# Events that open something later events refer to by the opening event's id, with the
# attribute that must be unique among the open ones (Temporal rejects duplicates).
_OPENERS: dict[EventType, tuple[str, str | None]] = {
    _E.ACTIVITY_TASK_SCHEDULED: (_ACTIVITY, "activity_id"),
    _E.TIMER_STARTED: (_TIMER, "timer_id"),
    _E.START_CHILD_WORKFLOW_EXECUTION_INITIATED: (_CHILD, None),
    _E.SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED: (_SIGNAL, None),
    _E.REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED: (_CANCEL, None),
}


class _Step(NamedTuple):
    """How an event moves something a history opened."""

    kind: str  # the opening event it must reference
    ref_key: str  # the attribute holding that event's id
    requires: str = ""  # a flag that must be set ("started") or absent ("!started")
    sets: str = ""  # a flag it sets
    closes: bool = False


_STEPS: dict[EventType, _Step] = {
    _E.ACTIVITY_TASK_STARTED: _Step(_ACTIVITY, _SCHEDULED, "!started", "started"),
    _E.ACTIVITY_TASK_COMPLETED: _Step(_ACTIVITY, _SCHEDULED, "started", closes=True),
    _E.ACTIVITY_TASK_FAILED: _Step(_ACTIVITY, _SCHEDULED, "started", closes=True),
    _E.ACTIVITY_TASK_TIMED_OUT: _Step(_ACTIVITY, _SCHEDULED, closes=True),
    _E.ACTIVITY_TASK_CANCEL_REQUESTED: _Step(_ACTIVITY, _SCHEDULED, "!cancel", "cancel"),
    _E.ACTIVITY_TASK_CANCELED: _Step(_ACTIVITY, _SCHEDULED, "cancel", closes=True),
    _E.TIMER_FIRED: _Step(_TIMER, _STARTED, closes=True),
    _E.TIMER_CANCELED: _Step(_TIMER, _STARTED, closes=True),
    _E.CHILD_WORKFLOW_EXECUTION_STARTED: _Step(_CHILD, _INITIATED, "!started", "started"),
    _E.START_CHILD_WORKFLOW_EXECUTION_FAILED: _Step(_CHILD, _INITIATED, "!started", closes=True),
    _E.CHILD_WORKFLOW_EXECUTION_COMPLETED: _Step(_CHILD, _INITIATED, "started", closes=True),
    _E.CHILD_WORKFLOW_EXECUTION_FAILED: _Step(_CHILD, _INITIATED, "started", closes=True),
    _E.CHILD_WORKFLOW_EXECUTION_CANCELED: _Step(_CHILD, _INITIATED, "started", closes=True),
    _E.CHILD_WORKFLOW_EXECUTION_TIMED_OUT: _Step(_CHILD, _INITIATED, "started", closes=True),
    _E.CHILD_WORKFLOW_EXECUTION_TERMINATED: _Step(_CHILD, _INITIATED, "started", closes=True),
    _E.EXTERNAL_WORKFLOW_EXECUTION_SIGNALED: _Step(_SIGNAL, _INITIATED, closes=True),
    _E.SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_FAILED: _Step(_SIGNAL, _INITIATED, closes=True),
    _E.EXTERNAL_WORKFLOW_EXECUTION_CANCEL_REQUESTED: _Step(_CANCEL, _INITIATED, closes=True),
    _E.REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_FAILED: _Step(_CANCEL, _INITIATED, closes=True),
}


def _is_schedule_to_start(value: Any) -> bool:
    if isinstance(value, str):
        return value in ("SCHEDULE_TO_START", TimeoutType.SCHEDULE_TO_START.proto_name)
    return value == TimeoutType.SCHEDULE_TO_START


class _Checker:
    """One pass over a history; each method checks one family of rules."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.opened: dict[int, tuple[str, set[str], Any]] = {}  # id -> (kind, flags, user id)
        self.task_scheduled: int | None = None
        self.task_started: int | None = None
        self.in_command_batch = False
        self.cancel_requested = False
        self.close_ids: list[int] = []
        self.unclosed_starts: dict[int, int] = {}  # scheduled id -> ActivityTaskStarted id

    def run(self, events: Sequence[HistoryEvent], closed: bool) -> list[str]:
        if not events:
            return ["history is empty"]
        previous: HistoryEvent | None = None
        for position, (event_id, raw_type, attrs) in enumerate(events, start=1):
            try:
                event_type = EventType(raw_type)
            except ValueError:
                self.problems.append(f"event {event_id}: unknown event type {raw_type!r}")
                previous = None
                continue
            where = f"event {event_id} {event_type.event_name}"
            self.order(position, event_id, event_type, where)
            self.workflow_cancel(event_type, where)
            if previous is not None:
                self.neighbours(previous, event_type, where)
            self.activity_batches(event_type, where)
            self.workflow_task(event_id, event_type, attrs, where)
            self.command_batch(event_type, where)
            self.opened_things(event_id, event_type, attrs, where)
            previous = (event_id, event_type, attrs)
        self.ending(events, closed)
        return self.problems

    def order(self, position: int, event_id: int, event_type: EventType, where: str) -> None:
        if event_id != position:
            self.problems.append(f"{where}: expected event id {position} (ids run 1, 2, 3 ...)")
        if (position == 1) != (event_type is _E.WORKFLOW_EXECUTION_STARTED):
            self.problems.append(
                f"{where}: the first event, and only it, must be WorkflowExecutionStarted"
            )
        if event_type in CLOSE_EVENT_TYPES:
            self.close_ids.append(event_id)

    def workflow_cancel(self, event_type: EventType, where: str) -> None:
        if event_type is _E.WORKFLOW_EXECUTION_CANCEL_REQUESTED:
            self.cancel_requested = True
        elif event_type is _E.WORKFLOW_EXECUTION_CANCELED and not self.cancel_requested:
            self.problems.append(f"{where}: no WorkflowExecutionCancelRequested before it")

    def neighbours(self, previous: HistoryEvent, event_type: EventType, where: str) -> None:
        prev_id, prev_type, _ = previous
        if prev_type is _E.WORKFLOW_TASK_STARTED and event_type not in _WORKFLOW_TASK_ENDS:
            self.problems.append(
                f"{where}: written while the workflow task started at event {prev_id} was in"
                " flight (events that arrive then are buffered until the task ends)"
            )

    def activity_batches(self, event_type: EventType, where: str) -> None:
        # ActivityTaskStarted is written with the attempt's close event, in one batch.
        # They are adjacent, unless the batch was buffered during a workflow task: the
        # flush then moves completions behind the other buffered events. Either way the
        # close comes before anything a workflow task or a command writes.
        if self.unclosed_starts and (
            event_type in _WORKFLOW_TASK_EVENTS
            or event_type in COMMAND_EVENT_TYPES
            or event_type in CLOSE_EVENT_TYPES
        ):
            for started_id in self.unclosed_starts.values():
                self.problems.append(
                    f"{where}: ActivityTaskStarted {started_id} has no close event before it"
                    " (both are written in one batch when the attempt closes)"
                )
            self.unclosed_starts.clear()

    def workflow_task(
        self, event_id: int, event_type: EventType, attrs: Mapping[str, Any], where: str
    ) -> None:
        # One workflow task at a time: Scheduled -> Started -> Completed|Failed|TimedOut.
        if event_type is _E.WORKFLOW_TASK_SCHEDULED:
            if self.task_scheduled is not None:
                self.problems.append(f"{where}: workflow task {self.task_scheduled} is pending")
            self.task_scheduled, self.task_started = event_id, None
        elif event_type is _E.WORKFLOW_TASK_STARTED:
            if self.task_scheduled is None or self.task_started is not None:
                self.problems.append(f"{where}: no WorkflowTaskScheduled is waiting to start")
            elif attrs.get(_SCHEDULED, self.task_scheduled) != self.task_scheduled:
                self.problems.append(f"{where}: {_SCHEDULED} should be {self.task_scheduled}")
            self.task_started = event_id
        elif event_type in _WORKFLOW_TASK_ENDS:
            # A schedule-to-start timeout ends a task that never started.
            needs_start = not (
                event_type is _E.WORKFLOW_TASK_TIMED_OUT
                and _is_schedule_to_start(attrs.get("timeout_type"))
            )
            if self.task_scheduled is None or needs_start != (self.task_started is not None):
                state = "started" if needs_start else "scheduled and not started"
                self.problems.append(f"{where}: no workflow task is {state}")
            else:
                for key, expected in (
                    (_SCHEDULED, self.task_scheduled),
                    (_STARTED, self.task_started or 0),
                ):
                    if key in attrs and attrs[key] != expected:
                        self.problems.append(f"{where}: {key} should be {expected}")
            self.task_scheduled = self.task_started = None

    def command_batch(self, event_type: EventType, where: str) -> None:
        if event_type in COMMAND_EVENT_TYPES and not self.in_command_batch:
            self.problems.append(
                f"{where}: a command event outside the batch of a WorkflowTaskCompleted"
            )
        self.in_command_batch = event_type is _E.WORKFLOW_TASK_COMPLETED or (
            self.in_command_batch
            and (event_type in COMMAND_EVENT_TYPES or event_type in _BATCH_COMPANIONS)
        )

    def opened_things(
        self, event_id: int, event_type: EventType, attrs: Mapping[str, Any], where: str
    ) -> None:
        if event_type in _OPENERS:
            kind, id_key = _OPENERS[event_type]
            user_id = attrs.get(id_key) if id_key else None
            if user_id is not None and any(
                k == kind and uid == user_id for k, _, uid in self.opened.values()
            ):
                self.problems.append(f"{where}: {id_key} {user_id!r} is already open")
            self.opened[event_id] = (kind, set(), user_id)
            return
        step = _STEPS.get(event_type)
        if step is None:
            return
        ref = attrs.get(step.ref_key)
        entry = self.opened.get(ref) if isinstance(ref, int) else None
        if entry is None or entry[0] != step.kind:
            self.problems.append(f"{where}: {step.ref_key} {ref!r} is not an open {step.kind}")
            return
        flags = entry[1]
        if step.requires:
            flag = step.requires.lstrip("!")
            must_be_absent = step.requires.startswith("!")
            if (flag in flags) == must_be_absent:
                state = "already" if must_be_absent else "not"
                what = "started" if flag == "started" else "cancel-requested"
                self.problems.append(f"{where}: {step.kind} {ref} is {state} {what}")
        if step.sets:
            flags.add(step.sets)
        if event_type is _E.ACTIVITY_TASK_STARTED:
            self.unclosed_starts[ref] = event_id
        if step.closes:
            del self.opened[ref]
            self.unclosed_starts.pop(ref, None)

    def ending(self, events: Sequence[HistoryEvent], closed: bool) -> None:
        last_id = events[-1][0]
        if len(self.close_ids) > 1:
            self.problems.append(f"more than one close event: events {self.close_ids}")
        if self.close_ids and self.close_ids[0] != last_id:
            self.problems.append(f"close event {self.close_ids[0]} is not the last event")
        if closed and not self.close_ids:
            self.problems.append("history has no close event")
        for started_id in self.unclosed_starts.values():
            self.problems.append(
                f"event {started_id} ActivityTaskStarted: its close event is missing"
            )


def check_well_formed(events: Sequence[HistoryEvent], *, closed: bool = True) -> list[str]:
    """Return the problems of one run's history; an empty list means well-formed.

    ``events`` are ``(event_id, event_type, attributes)`` with Temporal's attribute
    names (``scheduled_event_id``, ``started_event_id``, ``initiated_event_id``,
    ``activity_id``, ``timer_id``, ``timeout_type``). With ``closed`` (the default) the
    history must end with a close event; ``closed=False`` accepts a running workflow's
    history (which may still end with a started workflow task).

    The rules (SEMANTICS.md 6.2):

    * ids run 1, 2, 3 ...; the first event, and only it, is ``WorkflowExecutionStarted``;
    * at most one close event, and it is the last event;
    * one workflow task at a time: Scheduled, Started, then Completed, Failed or
      TimedOut (a schedule-to-start timeout needs no Started); nothing else is written
      while a task is started, because events arriving then are buffered;
    * command events (``ActivityTaskScheduled``, ``TimerStarted``, the close events a
      workflow asks for, ...) only in the batch that follows a ``WorkflowTaskCompleted``;
    * activity, timer, child and external-workflow events name an earlier opening event
      (``ActivityTaskScheduled``, ``TimerStarted``, ``...Initiated``) that is still
      open and in the right state (completed needs started, canceled needs a cancel
      request, nothing after the close); open activity and timer ids are unique;
    * ``ActivityTaskStarted`` is written in one batch with its close event: right before
      it, or, when the batch was buffered, with other buffered events in between (the
      flush moves completions last), but never past a workflow task or command event;
    * ``WorkflowExecutionCanceled`` needs an earlier ``WorkflowExecutionCancelRequested``.
    """
    return _Checker().run(events, closed)
