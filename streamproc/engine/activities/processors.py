"""One processor per activity command, with Temporal's semantics (SEMANTICS.md sections 1, 2, 13).

The rules themselves (normalisation, retry decisions, which timeout fires) are the pure
functions of `streamproc.semantics`; these processors apply them to partition state and
write what Temporal writes: no history event for a start or a retried attempt, and
`ActivityTaskStarted` only when the activity closes, right before the close event.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

import orjson

from streamproc.engine.activities.values import event_value, task_value
from streamproc.engine.processing import ProcessingContext
from streamproc.engine.validation import check_json
from streamproc.protocol.failures import check_failure_record, failure_from_record, failure_to_record
from streamproc.protocol.records import ActivityIntent as A
from streamproc.protocol.records import Record, RejectionType, ValueType
from streamproc.protocol.topics import check_task_queue
from streamproc.semantics import (
    ActivityRetry,
    ActivityTimedOut,
    ActivityTimeouts,
    InvalidArgument,
    TimeoutType,
    complete_attempt,
    fail_attempt,
    fire_activity_timeout,
    next_activity_deadline,
    normalize_activity_retry_policy,
    normalize_activity_timeouts,
    record_heartbeat,
    schedule_activity,
    start_attempt,
)
from streamproc.protocol.wire_values import policy_from_record, to_datetime, to_ms
from streamproc.state.activities import ActivityMeta, ArmedTimer, WorkflowOwner
from streamproc.protocol.wire_values import duration_from_ms

ACT = ValueType.ACTIVITY_TASK


def normalise_schedule(v: dict[str, Any], ctx: ProcessingContext) -> tuple[ActivityTimeouts, Any]:
    """The timeouts and retry policy an activity is scheduled with; raises InvalidArgument
    (with Temporal's texts) for a value that cannot be scheduled."""
    problem = (None if v["activity_id"] else "activity_id must be set") \
        or (None if v["activity_type"] else "activity_type must be set") \
        or check_task_queue(v["task_queue"]) \
        or check_json(v["input"], "input", ctx.limits.max_payload_bytes)
    if problem:
        raise InvalidArgument(problem)
    requested = ActivityTimeouts(*(duration_from_ms(v[f]) for f in (
        "schedule_to_close_timeout_ms", "schedule_to_start_timeout_ms",
        "start_to_close_timeout_ms", "heartbeat_timeout_ms")))
    timeouts = normalize_activity_timeouts(requested, activity_id=v["activity_id"],
                                           activity_type=v["activity_type"])
    policy = normalize_activity_retry_policy(policy_from_record(v["retry_policy"]))
    problem = ctx.admit_task_queue(v["task_queue"])  # last: bad arguments take no place under the cap
    if problem:
        raise InvalidArgument(problem)
    return timeouts, policy


def schedule(cmd: Record, ctx: ProcessingContext) -> None:
    v = cmd.value
    try:
        timeouts, policy = normalise_schedule(v, ctx)
    except InvalidArgument as exc:
        ctx.out.reject(cmd, RejectionType.INVALID_ARGUMENT, str(exc))
        return
    existing = ctx.activities.key_of(v["activity_id"])
    if existing is not None:
        ctx.out.reject(cmd, RejectionType.ALREADY_EXISTS,
                       f"an open activity already has ActivityId={v['activity_id']} (key {existing})")
        return
    create_activity(ctx, v, timeouts, policy)


def create_activity(ctx: ProcessingContext, v: dict[str, Any], timeouts: ActivityTimeouts, policy,
                    workflow: WorkflowOwner | None = None, started_by: str | None = None) -> int:
    """A new activity, its first attempt dispatched. One owned by a workflow run
    (`workflow`) writes its events into the run's history
    instead of its own (see `closing_events`).

    `started_by` (eager execution): the first attempt is started at once by that worker,
    which asked for it and gets the task as the reply to its command, not through the
    task queue; it counts as started from now, so only start-to-close, heartbeat and
    schedule-to-close timeouts apply (a worker that dies with it times out like any)."""
    key = ctx.keys.next_key()
    state = schedule_activity(policy, timeouts, to_datetime(ctx.now_ms))
    meta = ActivityMeta(v["activity_id"], v["activity_type"], v["task_queue"], v["input"], is_new=True)
    if workflow is None:
        ctx.out.event(ACT, A.SCHEDULED, key, event_value(meta, state, event_id=1))
    else:
        meta.workflow, meta.scheduled_event_id = workflow, workflow.scheduled_event_id
    if started_by is None:
        _dispatch(key, meta, state, ctx)
    else:
        meta.dispatched = True
        meta.identity = started_by
        state = start_attempt(state, to_datetime(ctx.now_ms))
        ctx.out.reply(ACT, A.ACTIVITY_TASK, key, task_value(meta, state))
    _save(key, meta, state, ctx)
    return key


def _dispatch(key: int, meta: ActivityMeta, state, ctx: ProcessingContext) -> None:
    """Publish the current attempt on its task queue."""
    meta.dispatched = True
    ctx.out.task(meta.task_queue, key, task_value(meta, state), ACT, A.ACTIVITY_TASK)


def _save(key: int, meta: ActivityMeta, state, ctx: ProcessingContext) -> None:
    """Store the activity with its one timer: the next dispatch or the next deadline."""
    if not meta.dispatched:
        timer = ArmedTimer(to_ms(state.scheduled_time), A.DISPATCH.value, "", state.attempt)
    else:
        deadline = next_activity_deadline(state)
        timer = (None if deadline is None else
                 ArmedTimer(to_ms(deadline.at), A.TIME_OUT.value, deadline.timeout_type.name, state.attempt))
    ctx.activities.arm(key, meta, timer)
    ctx.activities.put(key, meta, state)


def _open(cmd: Record, ctx: ProcessingContext, verb: str, *, started: bool,
          found: tuple[ActivityMeta, Any] | None = None) -> tuple[ActivityMeta, Any] | None:
    """The activity at the command's attempt (started or not, as asked), or None after
    rejecting. `found`: the activity, if the caller has read it already."""
    def problem(meta: ActivityMeta, state: Any) -> str | None:
        if cmd.value["attempt"] != state.attempt:
            return f"that attempt is over: the activity is at attempt {state.attempt}"
        if started and state.started_time is None:
            return "the attempt has not started"
        if not started and (state.started_time is not None or not meta.dispatched):
            return f"the attempt is {'already started' if state.started_time else 'not dispatched yet'}"
        return None

    if found is None and cmd.key >= 0:
        found = ctx.activities.get(cmd.key)
    return _checked(cmd, ctx, found, f"Expected to {verb} activity with key '{cmd.key}' at attempt {cmd.value['attempt']}, but", problem)


def _checked(cmd: Record, ctx: ProcessingContext, found: tuple[ActivityMeta, Any] | None, prefix: str,
             problem: Callable[[ActivityMeta, Any], str | None]) -> tuple[ActivityMeta, Any] | None:
    """`found` if an activity is open and `problem` finds nothing wrong with the command,
    else None after rejecting it (NOT_FOUND, or INVALID_STATE with the problem)."""
    if found is None:
        ctx.out.reject(cmd, RejectionType.NOT_FOUND, f"{prefix} no such activity is open")
        return None
    reason = problem(*found)
    if reason is None:
        return found
    ctx.out.reject(cmd, RejectionType.INVALID_STATE, f"{prefix} {reason}")
    return None


def start(cmd: Record, ctx: ProcessingContext) -> None:
    found = ctx.activities.get(cmd.key) if cmd.key >= 0 else None
    if _is_repeated_start(cmd, found):
        # A worker that got no answer sends its START again with the same request id
        # (a broker outage, an engine takeover): it is told again that the start is its.
        ctx.out.reply(ACT, A.ATTEMPT_STARTED, cmd.key, event_value(*found))
        return
    found = _open(cmd, ctx, "start", started=False, found=found)
    if found is None:
        return
    meta, state = found
    state = start_attempt(state, to_datetime(ctx.now_ms))
    meta.attempt_started(cmd.value["identity"], cmd.request_id)
    _save(cmd.key, meta, state, ctx)
    ctx.out.reply(ACT, A.ATTEMPT_STARTED, cmd.key, event_value(meta, state))


def _is_repeated_start(cmd: Record, found: tuple[ActivityMeta, Any] | None) -> bool:
    """Whether the command is a copy of the START that started the activity's current attempt."""
    if found is None or cmd.request_id is None:
        return False
    meta, state = found
    return (state.started_time is not None and state.attempt == cmd.value["attempt"]
            and meta.start_request_id == cmd.request_id)


def heartbeat(cmd: Record, ctx: ProcessingContext) -> None:
    """Record details and time; the armed timer stays (it fires early and re-arms)."""
    found = _open(cmd, ctx, "heartbeat", started=True)
    if found is None:
        return
    meta, state = found
    problem = check_json(cmd.value["details"] or "null", "details", ctx.limits.max_payload_bytes)
    if problem:
        ctx.out.reject(cmd, RejectionType.INVALID_ARGUMENT, problem)
        return
    details = cmd.value["details"]
    state = record_heartbeat(state, to_datetime(ctx.now_ms), _loads(details))
    ctx.activities.put(cmd.key, meta, state)
    ctx.out.reply(ACT, A.HEARTBEAT_RECORDED, cmd.key, event_value(meta, state))


def complete(cmd: Record, ctx: ProcessingContext) -> None:
    found = _open(cmd, ctx, "complete", started=True)
    if found is None:
        return
    meta, state = found
    result = cmd.value["result"] if cmd.value["result"] is not None else "null"
    problem = check_json(result, "result", ctx.limits.max_payload_bytes)
    if problem:
        ctx.out.reject(cmd, RejectionType.INVALID_ARGUMENT, problem)
        return
    outcome = complete_attempt(state, to_datetime(ctx.now_ms))
    after = _asks_next(cmd, ctx)
    closing_events(ctx, cmd.key, meta, state, outcome.last_failure, A.COMPLETED, hand_back_after=after,
                   task_answer=cmd.value.get("workflow_task_answer") if after else None, result=result)
    ctx.activities.remove(cmd.key, meta)
    _accepted(cmd, ctx, meta, state)


def fail(cmd: Record, ctx: ProcessingContext) -> None:
    found = _open(cmd, ctx, "fail", started=True)
    if found is None:
        return
    meta, state = found
    details = cmd.value["details"]
    problem = check_failure_record(cmd.value["failure"]) or (
        None if details is None else check_json(details, "last_heartbeat_details", ctx.limits.max_payload_bytes))
    if problem:
        ctx.out.reject(cmd, RejectionType.INVALID_ARGUMENT, problem)
        return
    if details is not None:  # Temporal's last_heartbeat_details: what the next attempt resumes from
        state = replace(state, last_heartbeat_details=_loads(details))
    outcome = fail_attempt(state, failure_from_record(cmd.value["failure"]), to_datetime(ctx.now_ms))
    _accepted(cmd, ctx, meta, state)
    if isinstance(outcome, ActivityRetry):
        _retry(cmd.key, meta, outcome, ctx)
        return
    closing_events(ctx, cmd.key, meta, state, outcome.last_failure, A.FAILED, hand_back_after=_asks_next(cmd, ctx),
                   failure=cmd.value["failure"], retry_state=outcome.retry_state.name)
    ctx.activities.remove(cmd.key, meta)


def _retry(key: int, meta: ActivityMeta, retry: ActivityRetry, ctx: ProcessingContext) -> None:
    """Another attempt is due after the backoff: no history event (Temporal writes none)."""
    meta.dispatched = False
    meta.identity = ""
    if retry.delay <= timedelta(0):
        _dispatch(key, meta, retry.state, ctx)
    _save(key, meta, retry.state, ctx)


def _armed_timer(cmd: Record, ctx: ProcessingContext, kind: str) -> tuple[ActivityMeta, Any] | None:
    """TIME_OUT / DISPATCH come from the checker, maybe twice or late: re-check the timer."""
    due = cmd.value["timer_due_ms"]

    def problem(meta: ActivityMeta, state: Any) -> str | None:
        timer = meta.timer
        if timer is None or timer.due_ms != due or timer.kind != kind:
            return f"the armed timer is {list(timer) if timer else None}"
        if due > ctx.now_ms:
            return f"it is not due yet (now {ctx.now_ms})"
        return None

    return _checked(cmd, ctx, ctx.activities.get(cmd.key),
                    f"Expected to fire the {kind} timer due at {due} of activity with key '{cmd.key}', but", problem)


def dispatch(cmd: Record, ctx: ProcessingContext) -> None:
    found = _armed_timer(cmd, ctx, A.DISPATCH)
    if found is None:
        return
    meta, state = found
    _dispatch(cmd.key, meta, state, ctx)
    _save(cmd.key, meta, state, ctx)


def time_out(cmd: Record, ctx: ProcessingContext) -> None:
    found = _armed_timer(cmd, ctx, A.TIME_OUT)
    if found is None:
        return
    meta, state = found
    timeout_type = TimeoutType[cmd.value["timeout_type"]]
    # The timeout happened at its deadline, not when this command got processed a few
    # ms later: a retry's backoff counts from the deadline, as if the timer were exact.
    fired_at = to_datetime(max(cmd.value["timer_due_ms"], 0))
    outcome = fire_activity_timeout(state, timeout_type, fired_at, attempt=cmd.value["attempt"])
    if outcome is None:
        # Early: a heartbeat moved the deadline. Arm the real one.
        _save(cmd.key, meta, state, ctx)
        ctx.out.reject(cmd, RejectionType.INVALID_STATE,
                       f"{timeout_type.name} deadline of activity with key '{cmd.key}' moved; "
                       f"timer re-armed for {list(meta.timer) if meta.timer else None}")
    elif isinstance(outcome, ActivityRetry):
        _retry(cmd.key, meta, outcome, ctx)
    else:
        _timed_out(cmd.key, meta, state, outcome, ctx)


def _timed_out(key: int, meta: ActivityMeta, state, outcome: ActivityTimedOut, ctx: ProcessingContext) -> None:
    closing_events(ctx, key, meta, state, outcome.last_failure, A.TIMED_OUT,
                   started=outcome.attempt_started, failure=failure_to_record(outcome.failure),
                   retry_state=outcome.retry_state.name)
    ctx.activities.remove(key, meta)


def request_cancel(cmd: Record, ctx: ProcessingContext) -> None:
    found = ctx.activities.get(cmd.key) if cmd.key >= 0 else None
    if found is None:
        ctx.out.reject(cmd, RejectionType.NOT_FOUND,
                       f"Expected to cancel activity with key '{cmd.key}', but no such activity is open")
        return
    meta, state = found
    refused = ctx.activity_owner(meta).cancel_refused(cmd.key)
    if refused is not None:
        ctx.out.reject(cmd, RejectionType.INVALID_STATE, refused)
        return
    if state.cancel_requested:
        ctx.out.reject(cmd, RejectionType.INVALID_STATE,
                       f"Expected to cancel activity with key '{cmd.key}', but cancellation was already requested")
        return
    event_id = meta.take_event_id()
    meta.latest_cancel_requested_event_id = event_id
    ctx.out.event(ACT, A.CANCEL_REQUESTED, cmd.key, event_value(meta, state, event_id=event_id))
    if state.started_time is None:  # scheduled or waiting out a retry backoff
        closing_events(ctx, cmd.key, meta, state, None, A.CANCELED, started=False,
                       details='"ACTIVITY_ID_NOT_STARTED"')
        ctx.activities.remove(cmd.key, meta)
        return
    _save(cmd.key, meta, replace(state, cancel_requested=True), ctx)


def report_canceled(cmd: Record, ctx: ProcessingContext) -> None:
    found = _open(cmd, ctx, "report canceled", started=True)
    if found is None:
        return
    meta, state = found
    closing_events(ctx, cmd.key, meta, state, state.last_failure, A.CANCELED, details=cmd.value["details"])
    ctx.activities.remove(cmd.key, meta)
    _accepted(cmd, ctx, meta, state)


def _accepted(cmd: Record, ctx: ProcessingContext, meta: ActivityMeta, state) -> None:
    """Tell a caller that asked (an asynchronous completion) that its answer was applied: an
    activity owned by a workflow run and a retried FAIL write nothing it would read."""
    if cmd.value["reply_when_accepted"]:
        ctx.out.reply(ACT, A.ANSWER_ACCEPTED, cmd.key, event_value(meta, state))


def _asks_next(cmd: Record, ctx: ProcessingContext) -> int:
    """The workflow task the answering worker has the run cached at, when it asks for the
    run's next task back and listens for it (0: it does not)."""
    return (cmd.value.get("return_workflow_task_after") or 0) if ctx.out.caller_listens else 0


def _loads(text: str | None) -> Any:
    return orjson.loads(text) if text else None


ACTIVITY_PROCESSORS = {
    A.SCHEDULE: schedule,
    A.START: start,
    A.HEARTBEAT: heartbeat,
    A.COMPLETE: complete,
    A.FAIL: fail,
    A.TIME_OUT: time_out,
    A.DISPATCH: dispatch,
    A.REQUEST_CANCEL: request_cancel,
    A.REPORT_CANCELED: report_canceled,
}


def closing_events(ctx: ProcessingContext, key: int, meta: ActivityMeta, state, last_failure, close_intent: str,
                   started: bool = True, hand_back_after: int = 0, task_answer: str | None = None,
                   **fields: Any) -> None:
    """The activity closed: its owner writes what it writes (see `owners.py`)."""
    ctx.activity_owner(meta).activity_closed(ctx, key, meta, state, last_failure, close_intent, started, fields,
                                             hand_back_after, task_answer)
