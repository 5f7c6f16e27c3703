"""Activities owned by a workflow run: scheduled by its commands, run by the activity
machinery (four timeouts, retry policy), and closed into the run's history.

Temporal writes no event for an attempt that is retried: the run sees
ActivityTaskStarted (of the last attempt) and the close event, in one batch, followed
by a new workflow task (or buffered while one is out).
"""

from __future__ import annotations

from dataclasses import replace
from collections.abc import Callable
from typing import Any

from streamproc.engine.activities.processors import create_activity, normalise_schedule
from streamproc.engine.processing import ProcessingContext
from streamproc.engine.workflows.runs import RunWriter
from streamproc.protocol.failures import failure_to_record
from streamproc.protocol.records import ActivityIntent
from streamproc.semantics import ActivityState, InvalidArgument
from streamproc.semantics.workflow_events import EventType
from streamproc.protocol.wire_values import (policy_from_record, policy_to_record, timeouts_from_record,
                                             timeouts_to_record, to_ms)
from streamproc.state.activities import ActivityMeta, WorkflowOwner
from streamproc.state.workflow_run import WorkflowRun
from streamproc.state.workflow_run_parts import PendingEvent, RunActivity

E = EventType

_CLOSE_EVENTS = {
    ActivityIntent.COMPLETED: E.ACTIVITY_TASK_COMPLETED,
    ActivityIntent.FAILED: E.ACTIVITY_TASK_FAILED,
    ActivityIntent.TIMED_OUT: E.ACTIVITY_TASK_TIMED_OUT,
    ActivityIntent.CANCELED: E.ACTIVITY_TASK_CANCELED,
}

#: The attributes Temporal gives each close event (besides scheduled/started event ids).
_CLOSE_ATTRIBUTES = {
    E.ACTIVITY_TASK_COMPLETED: ("result", "identity"),
    E.ACTIVITY_TASK_FAILED: ("failure", "retry_state", "identity"),
    E.ACTIVITY_TASK_TIMED_OUT: ("failure", "retry_state"),
    E.ACTIVITY_TASK_CANCELED: ("latest_cancel_requested_event_id", "details"),
}


def validate_schedule(ctx: ProcessingContext, run: WorkflowRun, command: dict[str, Any]) -> dict[str, Any]:
    """The ACTIVITY_TASK_SCHEDULED attributes of a SCHEDULE_ACTIVITY_TASK command, normalised;
    raises InvalidArgument. An empty task queue is the workflow's."""
    v = {"activity_id": command.get("activity_id") or "", "activity_type": command.get("activity_type") or "",
         "task_queue": command.get("task_queue") or run.task_queue,
         "input": command.get("input") if command.get("input") is not None else "null",
         "retry_policy": command.get("retry_policy")}
    for name in ("schedule_to_close_timeout_ms", "schedule_to_start_timeout_ms",
                 "start_to_close_timeout_ms", "heartbeat_timeout_ms"):
        value = command.get(name) or 0
        if not isinstance(value, int):
            raise InvalidArgument(f"{name} must be an integer, got {value!r}")
        v[name] = value
    timeouts, policy = normalise_schedule(v, ctx)
    return {**v, **timeouts_to_record(timeouts), "retry_policy": policy_to_record(policy)}


def schedule(w: RunWriter, attributes: dict[str, Any], completed_event_id: int, eager_for: str | None = None) -> None:
    """ACTIVITY_TASK_SCHEDULED and the activity itself, its first attempt dispatched; or,
    if the command asked for eager execution and `eager_for` (the identity of the worker
    that completed the task and listens for replies) may have it, started by that worker.
    As in Temporal, only an activity on the workflow's own task queue runs eagerly."""
    ctx, run = w.ctx, w.run
    eager = attributes.pop("request_eager_execution", False) and eager_for is not None \
        and attributes["task_queue"] == run.task_queue
    scheduled_id = w.append(E.ACTIVITY_TASK_SCHEDULED,
                            {**attributes, "workflow_task_completed_event_id": completed_event_id})
    # Normalised and admitted by `validate_schedule` already: the activity keeps them typed.
    timeouts, policy = timeouts_from_record(attributes), policy_from_record(attributes["retry_policy"])
    key = create_activity(ctx, attributes, timeouts, policy,
                          workflow=WorkflowOwner(w.key, scheduled_id, run.workflow_id, run.run_id,
                                                 run.workflow_type),
                          started_by=eager_for if eager else None)
    run.activities[scheduled_id] = RunActivity(key, attributes["activity_id"], attributes["activity_type"])


def request_cancel(w: RunWriter, scheduled_id: int, completed_event_id: int) -> bool:
    """ACTIVITY_TASK_CANCEL_REQUESTED; an activity that is not running (not started, or
    waiting out a retry backoff) is canceled at once. True if that needs a workflow task."""
    ctx, run = w.ctx, w.run
    entry = run.activities[scheduled_id]
    entry.cancel_requested = True
    request_id = w.append(E.ACTIVITY_TASK_CANCEL_REQUESTED, {
        "scheduled_event_id": scheduled_id, "workflow_task_completed_event_id": completed_event_id})
    found = None if entry.closed else ctx.activities.get(entry.key)
    if found is None:  # its close is buffered already: the run learns about it anyway
        return False
    meta, state = found
    if state.started_time is None:
        ctx.activities.remove(entry.key, meta)
        del run.activities[scheduled_id]
        w.append(E.ACTIVITY_TASK_CANCELED, {
            "scheduled_event_id": scheduled_id, "started_event_id": 0,
            "latest_cancel_requested_event_id": request_id, "details": '"ACTIVITY_ID_NOT_STARTED"'})
        return True
    # The worker learns it from its heartbeat answers, and reports the cancellation.
    meta.latest_cancel_requested_event_id = request_id
    ctx.activities.put(entry.key, meta, replace(state, cancel_requested=True))
    return False


#: Delivers an activity's close with the next workflow task's answer riding along
#: (`ride_along.deliver_with_answer`, injected: it needs the task processors, which need this module).
RideAlong = Callable[[RunWriter, list[PendingEvent], int, str], None]


class WorkflowActivityOwner:
    """The run that scheduled the activity: it cancels it, and its close goes to the history."""

    def __init__(self, ride_along: RideAlong | None = None) -> None:
        self.ride_along = ride_along

    def cancel_refused(self, key: int) -> str | None:
        return (f"Expected to cancel activity with key '{key}', but it belongs to a workflow "
                f"run: the workflow cancels it (REQUEST_CANCEL_ACTIVITY_TASK)")

    def activity_closed(self, ctx: ProcessingContext, key: int, meta: ActivityMeta, state: ActivityState,
                        last_failure: Any, close_intent: str, started: bool, fields: dict[str, Any],
                        hand_back_after: int = 0, task_answer: str | None = None) -> None:
        """The activity machinery closed an owned activity: its events go to the run, and the
        next workflow task to the worker that asked for it, if it may have it (`deliver`)."""
        run_key, scheduled_id = meta.workflow.run_key, meta.workflow.scheduled_event_id
        run = ctx.workflows.get(run_key)
        if run is None or scheduled_id not in run.activities:
            return  # the run closed first; its activities were dropped with it
        close_type = _CLOSE_EVENTS[close_intent]
        values = {"identity": meta.identity,
                  "latest_cancel_requested_event_id": meta.latest_cancel_requested_event_id, **fields}
        close_attributes = {"scheduled_event_id": scheduled_id,
                            **{name: values.get(name) for name in _CLOSE_ATTRIBUTES[close_type]}}
        events: list[PendingEvent] = []
        if started:
            # Recorded at the close, stamped with the start, as Temporal's history has it.
            events.append(PendingEvent(E.ACTIVITY_TASK_STARTED.name, {
                "scheduled_event_id": scheduled_id, "identity": meta.identity, "attempt": state.attempt,
                "last_failure": failure_to_record(last_failure)},
                event_time_ms=to_ms(state.started_time) if state.started_time else None))
            events.append(PendingEvent(close_type.name, close_attributes, links_started=True))
        else:
            events.append(PendingEvent(close_type.name, {**close_attributes, "started_event_id": 0}))
        if run.task is not None:
            run.activities[scheduled_id].closed = True  # forgotten when the buffer flushes
        else:
            del run.activities[scheduled_id]
        writer = RunWriter(ctx, run_key, run)
        if task_answer is not None and hand_back_after and self.ride_along is not None:
            self.ride_along(writer, events, hand_back_after, task_answer)
        else:
            writer.deliver(events, hand_back_after)
        ctx.workflows.put(run_key, run)
