"""The commands of a completed workflow task: validated all first, then applied in order.

A bad command fails the whole task (WORKFLOW_TASK_FAILED with Temporal's cause) and none
is applied, as in Temporal. A close command while events are buffered fails the task
with UNHANDLED_COMMAND: the workflow has not seen them yet, so the next task shows them.
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from streamproc.engine.workflows import activities as workflow_activities
from streamproc.engine.workflows import children, cron, externals, updates
from streamproc.engine.processing import ProcessingContext
from streamproc.engine.validation import check_json
from streamproc.engine.workflows.runs import E, RunWriter
from streamproc.engine.workflows.start import start_run
from streamproc.protocol.codec import excerpt
from streamproc.protocol.failures import check_failure_record, failure_from_record
from streamproc.protocol.topics import check_task_queue
from streamproc.protocol.workflow_commands import WorkflowCommandType
from streamproc.semantics import InvalidArgument
from streamproc.semantics.enums import RetryState
from streamproc.semantics.workflow_events import ContinueAsNewInitiator
from streamproc.semantics.workflow_ids import WorkflowExecutionStatus as Status
from streamproc.semantics.workflow_retry import plan_workflow_retry
from streamproc.semantics.workflow_timeouts import WorkflowTimeouts, continue_as_new_timeouts
from streamproc.protocol.wire_values import policy_from_record, to_datetime, to_ms
from streamproc.state.workflow_run import WorkflowRun
from streamproc.protocol.wire_values import duration_from_ms

T = WorkflowCommandType
_MARKER_RECORDED = E.MARKER_RECORDED  # looked up once: a member's lookup on its class is a call


class BadCommand(Exception):
    """A command the task may not carry: the task fails with `cause`."""

    def __init__(self, cause: str, message: str) -> None:
        super().__init__(message)
        self.cause = cause
        self.message = message


class _Open:
    """What the run and the task's earlier commands leave open, for the later ones to check
    against. Each part is taken from the run when a command first asks for it (a task's
    markers ask for none), before any command is applied: the run is as validation found it."""

    __slots__ = ("_run", "_activity_ids", "_timers", "_cancelable", "_update_states")

    def __init__(self, run: WorkflowRun) -> None:
        self._run = run
        self._activity_ids: set[str] | None = None
        self._timers: set[str] | None = None
        self._cancelable: set[int] | None = None
        self._update_states: dict[str, str] | None = None

    @property
    def activity_ids(self) -> set[str]:
        if self._activity_ids is None:
            self._activity_ids = self._run.open_activity_ids()
        return self._activity_ids

    @property
    def timers(self) -> set[str]:
        if self._timers is None:
            self._timers = set(self._run.timers)
        return self._timers

    @property
    def cancelable(self) -> set[int]:
        """Scheduled event ids of activities whose cancellation was not requested yet."""
        if self._cancelable is None:
            self._cancelable = self._run.cancelable_activities()
        return self._cancelable

    @property
    def update_states(self) -> dict[str, str]:
        """Update id -> ADMITTED / ACCEPTED / COMPLETED, as the earlier commands leave it."""
        if self._update_states is None:
            self._update_states = {u: entry.state for u, entry in self._run.updates.items()}
        return self._update_states


Validated = tuple[WorkflowCommandType, dict[str, Any]]


def validate(ctx: ProcessingContext, run: WorkflowRun, commands: Any) -> list[Validated]:
    """Check every command against the run as the earlier commands leave it; raises BadCommand."""
    if not isinstance(commands, list) or not all(isinstance(c, dict) for c in commands):
        raise BadCommand("UNHANDLED_COMMAND", "commands must be a JSON list of objects")
    still_open = _Open(run)
    closed_by: WorkflowCommandType | None = None
    out: list[Validated] = []
    for command in commands:
        kind = T.parse(command.get("type"))
        if kind is None:
            raise BadCommand("UNHANDLED_COMMAND", f"unknown command type {excerpt(str(command.get('type')))}")
        if closed_by is not None:
            raise BadCommand(closed_by.spec.bad_attributes_cause, f"invalid command sequence: {kind} after "
                                                                  f"{closed_by}, which must be the last command")
        check, _ = _HANDLERS[kind]
        try:
            attributes = check(ctx, run, command, still_open)
        except InvalidArgument as exc:
            raise BadCommand(kind.spec.bad_attributes_cause, str(exc)) from None
        if kind.closes_run:
            if run.buffered:
                raise BadCommand("UNHANDLED_COMMAND", f"{kind} while {len(run.buffered)} new events "
                                                      f"are waiting for the workflow")
            closed_by = kind
        out.append((kind, attributes))
    return out


def apply(writer: RunWriter, commands: list[Validated], completed_id: int, eager_for: str | None = None) -> bool:
    """Write the commands' events and effects; True if an event needs a new workflow task.
    `eager_for`: the worker that may run activities eagerly (see `workflow_activities.schedule`)."""
    needs_task = False
    for kind, attributes in commands:
        _, apply_one = _HANDLERS[kind]
        needs_task |= bool(apply_one(writer, attributes, completed_id, eager_for))
    return needs_task


# checks: the command's attributes as its event records them; raise InvalidArgument or BadCommand

def _check_schedule_activity(ctx: ProcessingContext, run: WorkflowRun, c: dict, still_open: _Open) -> dict[str, Any]:
    attributes = workflow_activities.validate_schedule(ctx, run, c)
    if attributes["activity_id"] in still_open.activity_ids:
        raise BadCommand("SCHEDULE_ACTIVITY_DUPLICATE_ID",
                         f"Activity with ActivityId {attributes['activity_id']} is already open")
    still_open.activity_ids.add(attributes["activity_id"])
    return {**attributes, "request_eager_execution": c.get("request_eager_execution") is True}


def _check_request_cancel_activity(ctx: ProcessingContext, run: WorkflowRun, c: dict, still_open: _Open) -> dict[str, Any]:
    scheduled_id = c.get("scheduled_event_id")
    if scheduled_id not in still_open.cancelable:
        raise InvalidArgument(f"no open activity with scheduled_event_id {scheduled_id!r} "
                              f"whose cancellation was not requested yet")
    still_open.cancelable.discard(scheduled_id)
    return {"scheduled_event_id": scheduled_id}


def _check_start_timer(ctx: ProcessingContext, run: WorkflowRun, c: dict, still_open: _Open) -> dict[str, Any]:
    timer_id, timeout_ms = c.get("timer_id"), c.get("start_to_fire_timeout_ms")
    if not timer_id or not isinstance(timer_id, str):
        raise InvalidArgument("TimerId is not set on command.")
    if not isinstance(timeout_ms, int) or timeout_ms <= 0:
        raise InvalidArgument(f"A valid StartToFireTimeout is not set on command, got {timeout_ms!r}.")
    if timer_id in still_open.timers:
        raise BadCommand("START_TIMER_DUPLICATE_ID", f"Timer with TimerId {timer_id} is already open")
    still_open.timers.add(timer_id)
    return {"timer_id": timer_id, "start_to_fire_timeout_ms": timeout_ms}


def _check_cancel_timer(ctx: ProcessingContext, run: WorkflowRun, c: dict, still_open: _Open) -> dict[str, Any]:
    if c.get("timer_id") not in still_open.timers:
        raise InvalidArgument(f"no open timer with TimerId {c.get('timer_id')!r}")
    still_open.timers.discard(c["timer_id"])
    return {"timer_id": c["timer_id"]}


def _check_record_marker(ctx: ProcessingContext, run: WorkflowRun, c: dict, still_open: _Open) -> dict[str, Any]:
    if not c.get("marker_name") or not isinstance(c["marker_name"], str):
        raise InvalidArgument("MarkerName is not set on command.")
    # A local activity's marker carries its result: held to the payload limit like one.
    size = len(orjson.dumps(c.get("details")))
    if size > ctx.limits.max_payload_bytes:
        raise InvalidArgument(f"marker details are {size} bytes, more than the limit of {ctx.limits.max_payload_bytes}")
    return {"marker_name": c["marker_name"], "details": c.get("details")}


def _check_complete(ctx: ProcessingContext, run: WorkflowRun, c: dict, still_open: _Open) -> dict[str, Any]:
    result = c.get("result")
    problem = check_json(result if result is not None else "null", "result", ctx.limits.max_payload_bytes)
    if problem:
        raise InvalidArgument(problem)
    return {"result": result}


def _check_fail(ctx: ProcessingContext, run: WorkflowRun, c: dict, still_open: _Open) -> dict[str, Any]:
    problem = check_failure_record(c.get("failure"))
    if problem:
        raise InvalidArgument(problem)
    return {"failure": c["failure"]}


def _check_cancel(ctx: ProcessingContext, run: WorkflowRun, c: dict, still_open: _Open) -> dict[str, Any]:
    if not run.cancel_requested:
        raise InvalidArgument("the workflow may cancel itself only after a cancellation request")
    return {"details": c.get("details")}


def _check_continue_as_new(ctx: ProcessingContext, run: WorkflowRun, c: dict, still_open: _Open) -> dict[str, Any]:
    queue = c.get("task_queue") or run.task_queue
    problem = check_task_queue(queue) or check_json(
        c.get("input") if c.get("input") is not None else "null", "input", ctx.limits.max_payload_bytes) \
        or ctx.admit_task_queue(queue)
    if problem:
        raise InvalidArgument(problem)
    requested = WorkflowTimeouts(run=duration_from_ms(c.get("workflow_run_timeout_ms") or 0),
                                 task=duration_from_ms(c.get("workflow_task_timeout_ms") or 0))
    timeouts = continue_as_new_timeouts(requested, run.timeouts.as_workflow_timeouts())
    return {"workflow_type": c.get("workflow_type") or run.workflow_type, "task_queue": queue,
            "input": c.get("input"), "timeouts": timeouts}


# applies: the events and effects; True if the run needs a new workflow task

def _schedule_activity(w: RunWriter, a: dict, completed_id: int, eager_for: str | None) -> bool:
    workflow_activities.schedule(w, a, completed_id, eager_for)
    return False


def _request_cancel_activity(w: RunWriter, a: dict, completed_id: int, eager_for: str | None) -> bool:
    return workflow_activities.request_cancel(w, a["scheduled_event_id"], completed_id)


def _start_timer(w: RunWriter, a: dict, completed_id: int, eager_for: str | None) -> bool:
    started_id = w.append(E.TIMER_STARTED, {**a, "workflow_task_completed_event_id": completed_id})
    w.ctx.workflow_timers.start_timer(w.key, w.run, a["timer_id"], w.ctx.now_ms + a["start_to_fire_timeout_ms"],
                                      started_id)
    return False


def _record_marker(w: RunWriter, a: dict, completed_id: int, eager_for: str | None) -> bool:
    w.append(_MARKER_RECORDED, {**a, "workflow_task_completed_event_id": completed_id})
    return False


def _complete(w: RunWriter, a: dict, completed_id: int, eager_for: str | None) -> bool:
    """WORKFLOW_EXECUTION_COMPLETED, and a cron workflow's next run, given this result."""
    cron_backoff = cron.next_run_backoff(w.ctx, w.run)
    new_run_id = str(uuid.uuid4()) if cron_backoff is not None else ""
    w.close(Status.COMPLETED, E.WORKFLOW_EXECUTION_COMPLETED, {
        **a, "workflow_task_completed_event_id": completed_id, "new_execution_run_id": new_run_id})
    if cron_backoff is not None:
        next_run(w.ctx, w.key, w.run, new_run_id, ContinueAsNewInitiator.CRON_SCHEDULE, attempt=1,
                 backoff_ms=to_ms(cron_backoff), last_completion_result=a["result"])
    return False


def _cancel(w: RunWriter, a: dict, completed_id: int, eager_for: str | None) -> bool:
    w.close(Status.CANCELED, E.WORKFLOW_EXECUTION_CANCELED, {**a, "workflow_task_completed_event_id": completed_id})
    return False


def _cancel_timer(w: RunWriter, a: dict, completed_id: int, eager_for: str | None) -> bool:
    run, timer_id = w.run, a["timer_id"]
    timer = w.ctx.workflow_timers.remove_timer(w.key, run, timer_id)
    if timer.fired:  # it fired while the task was out: the cancel wins, as in Temporal
        run.buffered = [e for e in run.buffered
                        if not (e.type_name == E.TIMER_FIRED.name and e.attributes["timer_id"] == timer_id)]
    w.append(E.TIMER_CANCELED, {
        "timer_id": timer_id, "started_event_id": timer.started_event_id,
        "workflow_task_completed_event_id": completed_id})
    return False


def _fail(w: RunWriter, a: dict, completed_id: int, eager_for: str | None) -> bool:
    """WORKFLOW_EXECUTION_FAILED, and a retry run if the policy asks for one (SEMANTICS 1.7),
    else a cron workflow's next run. A retry run gets no last completion result; a cron
    run gets the one this run was started with (Temporal reads it from the start event)."""
    ctx, run_key, run = w.ctx, w.key, w.run
    failure = a["failure"]
    plan = plan_workflow_retry(
        policy_from_record(run.retry_policy) if run.retry_policy is not None else None,
        attempt=run.attempt, failure=failure_from_record(failure), now=to_datetime(ctx.now_ms),
        execution_expiration=to_datetime(run.execution_expiration_ms) if run.execution_expiration_ms else None,
        previous_run_execution_time=to_datetime(run.execution_time_ms))
    retrying = plan.retry_state is RetryState.IN_PROGRESS
    cron_backoff = None if retrying else cron.next_run_backoff(ctx, run)
    new_run_id = str(uuid.uuid4()) if retrying or cron_backoff is not None else ""
    last_result = cron.started_with_completion_result(ctx, run_key) if cron_backoff is not None else None
    w.close(Status.FAILED, E.WORKFLOW_EXECUTION_FAILED, {
        "failure": failure, "retry_state": plan.retry_state.name,
        "workflow_task_completed_event_id": completed_id, "new_execution_run_id": new_run_id})
    if retrying:
        next_run(ctx, run_key, run, new_run_id, ContinueAsNewInitiator.RETRY, attempt=plan.next_attempt,
                 backoff_ms=to_ms(plan.first_workflow_task_backoff), continued_failure=failure)
    elif cron_backoff is not None:
        next_run(ctx, run_key, run, new_run_id, ContinueAsNewInitiator.CRON_SCHEDULE, attempt=1,
                 backoff_ms=to_ms(cron_backoff), continued_failure=failure, last_completion_result=last_result)
    return False


def next_run(ctx: ProcessingContext, run_key: int, run: WorkflowRun, new_run_id: str,
             initiator: ContinueAsNewInitiator, *, attempt: int, backoff_ms: int = 0,
             continued_failure: dict | None = None, **changes: Any) -> None:
    """The run that follows a closed one (retry, cron or continue-as-new, see
    `WorkflowRun.successor`). It keeps the chain's start request id: a START resent with it
    (a client across a broker outage) is answered with the chain's current run instead of
    starting another."""
    start = run.successor(new_run_id, initiator, attempt=attempt, backoff_ms=backoff_ms,
                          continued_failure=continued_failure, **changes)
    ctx.workflows.put(run_key, run)
    start_run(ctx, start)


def _continue_as_new(w: RunWriter, a: dict, completed_id: int, eager_for: str | None) -> bool:
    new_run_id = str(uuid.uuid4())
    t = a["timeouts"]
    w.close(Status.CONTINUED_AS_NEW, E.WORKFLOW_EXECUTION_CONTINUED_AS_NEW, {
        "new_execution_run_id": new_run_id, "workflow_type": a["workflow_type"], "task_queue": a["task_queue"],
        "input": a["input"], "workflow_run_timeout_ms": to_ms(t.run), "workflow_task_timeout_ms": to_ms(t.task),
        "initiator": ContinueAsNewInitiator.WORKFLOW.name, "workflow_task_completed_event_id": completed_id})
    next_run(w.ctx, w.key, w.run, new_run_id, ContinueAsNewInitiator.WORKFLOW, attempt=1, **a)
    return False


#: Each command type's check and apply; its event and failure cause are its row in
#: `protocol/workflow_commands.py`.
_HANDLERS = {
    T.SCHEDULE_ACTIVITY_TASK: (_check_schedule_activity, _schedule_activity),
    T.REQUEST_CANCEL_ACTIVITY_TASK: (_check_request_cancel_activity, _request_cancel_activity),
    T.START_TIMER: (_check_start_timer, _start_timer),
    T.CANCEL_TIMER: (_check_cancel_timer, _cancel_timer),
    T.RECORD_MARKER: (_check_record_marker, _record_marker),
    T.COMPLETE_WORKFLOW_EXECUTION: (_check_complete, _complete),
    T.FAIL_WORKFLOW_EXECUTION: (_check_fail, _fail),
    T.CANCEL_WORKFLOW_EXECUTION: (_check_cancel, _cancel),
    T.CONTINUE_AS_NEW_WORKFLOW_EXECUTION: (_check_continue_as_new, _continue_as_new),
    T.START_CHILD_WORKFLOW_EXECUTION: (children.check_start_child, children.start_child),
    T.SIGNAL_EXTERNAL_WORKFLOW_EXECUTION: (externals.check_signal_external, externals.signal_external),
    T.REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION: (externals.check_cancel_external, externals.cancel_external),
    T.ACCEPT_UPDATE: (updates.check_accept, updates.accept),
    T.COMPLETE_UPDATE: (updates.check_complete, updates.complete),
    T.REJECT_UPDATE: (updates.check_reject, updates.reject),
}
assert set(_HANDLERS) == set(WorkflowCommandType), "every command type needs a check and an apply"
