"""START: validate, resolve the workflow id against its current run (SEMANTICS.md 4 and 13),
and start a run; `start_run` also starts the runs that follow a retry or continue-as-new.

A START that names a signal is Temporal's SignalWithStart: the signal goes to the
running run (conflict policy USE_EXISTING by default; FAIL is refused), or the new run
records it right after WORKFLOW_EXECUTION_STARTED, before its first workflow task.
A signal-with-start that finds a run waiting out its first-task backoff gives it its
first task at once; a plain SIGNAL does not (both as a Temporal server, 1.32).

A START with `start_delay_ms` (Temporal's start_delay) starts the run at once and
schedules its first workflow task after the delay: the run's first-task backoff
(BACKOFF_START), the due date a cron workflow's first run waits on too.
"""

from __future__ import annotations

import functools
from datetime import timedelta

import orjson

from streamproc.engine.processing import ProcessingContext
from streamproc.engine import run_ids
from streamproc.engine.validation import check_json
from streamproc.engine.workflows.cron import first_run_backoff
from streamproc.engine.workflows.result_waiters import close_reply_of, close_reply_problem, wait_for_close
from streamproc.engine.workflows.scheduled import scheduled_run_id, tell_schedule_start_failed
from streamproc.engine.workflows.senders import command_attributes
from streamproc.engine.workflows.signals import SignalRequest, check_signal, signal_run
from streamproc.engine.workflows.runs import (
    EXECUTION_TIME_OUT,
    RUN_TIME_OUT,
    WF,
    BACKOFF_START,
    RunWriter,
)
from streamproc.protocol.records import Record, RejectionType, WorkflowIntent
from streamproc.protocol.topics import check_task_queue
from streamproc.semantics import InvalidArgument, normalize_workflow_retry_policy
from streamproc.semantics.cron_workflow import validate_cron_schedule
from streamproc.semantics.workflow_events import ContinueAsNewInitiator, EventType
from streamproc.semantics.workflow_ids import (
    CurrentRun,
    WorkflowIdAction,
    WorkflowIdConflictPolicy,
    WorkflowIdPolicies,
    WorkflowIdReusePolicy,
    normalize_workflow_id_policies,
    resolve_duplicate_workflow_id,
    validate_workflow_id,
)
from streamproc.semantics.workflow_retry import workflow_execution_expiration
from streamproc.semantics.workflow_timeouts import (
    WorkflowTimeouts,
    normalize_workflow_timeouts,
    validate_workflow_start_delay,
    workflow_run_deadlines,
)
from streamproc.protocol.wire_values import ceil_ms, policy_from_record, policy_to_record, to_datetime, to_ms
from streamproc.state.workflow_run import RunStart, WorkflowRun
from streamproc.protocol.wire_values import duration_from_ms

#: Enum members looked up once (a member's lookup on its class is a Python call per use).
_ALREADY_STARTED, _RETURN_EXISTING = WorkflowIdAction.ALREADY_STARTED, WorkflowIdAction.RETURN_EXISTING
_TERMINATE_EXISTING_AND_START = WorkflowIdAction.TERMINATE_EXISTING_AND_START
_CRON_SCHEDULE, _NO_INITIATOR = ContinueAsNewInitiator.CRON_SCHEDULE, ContinueAsNewInitiator.UNSPECIFIED
_EXECUTION_STARTED = EventType.WORKFLOW_EXECUTION_STARTED


def _enum(enum, name: str, what: str):
    if not name:
        return enum.UNSPECIFIED
    try:
        return enum[name]
    except KeyError:
        allowed = ", ".join(m.name for m in enum if m.value)
        raise InvalidArgument(f"{what} must be one of {allowed}, got {name!r}") from None


def start(cmd: Record, ctx: ProcessingContext) -> None:
    v = cmd.value
    with_signal = bool(v["signal_name"])
    attributes = command_attributes(cmd)
    parent = attributes.get("parent")  # a child's start, from its parent's partition
    scheduled_by = attributes.get("schedule")  # a schedule's action, from the schedule's partition
    try:
        validate_workflow_id(v["workflow_id"], max_length=ctx.limits.history.max_id_length)
        problem = (None if v["workflow_type"] else "WorkflowType is not set on request.") \
            or check_task_queue(v["task_queue"]) \
            or check_json(v["input"] if v["input"] is not None else "null", "input",
                          ctx.limits.max_payload_bytes) \
            or (check_signal(ctx, v["signal_name"], v["signal_input"]) if with_signal else None)\
            or close_reply_problem(cmd)
        if problem:
            raise InvalidArgument(problem)
        timeouts = _normalized_timeouts(v["workflow_execution_timeout_ms"], v["workflow_run_timeout_ms"],
                                        v["workflow_task_timeout_ms"])
        policy = normalize_workflow_retry_policy(
            policy_from_record(v["retry_policy"]) if v["retry_policy"] is not None else None)
        if v["cron_schedule"]:  # (without one, no need for the time as a datetime)
            validate_cron_schedule(v["cron_schedule"], to_datetime(ctx.now_ms))
        start_delay = validate_workflow_start_delay(v["cron_schedule"], _start_delay(v))
        policies = _id_policies(v["id_reuse_policy"], v["id_conflict_policy"], with_signal)
        # Last: a start with bad arguments does not take a place under the cap.
        problem = ctx.admit_task_queue(v["task_queue"])
        if problem:
            raise InvalidArgument(problem)
    except InvalidArgument as exc:
        ctx.out.reject(cmd, RejectionType.INVALID_ARGUMENT, str(exc))
        _tell_parent(ctx, parent, WorkflowIntent.CHILD_START_FAILED, cause="UNSPECIFIED")
        tell_schedule_start_failed(ctx, scheduled_by, v["workflow_id"], str(exc))
        return
    request_id = cmd.request_id or ""
    waiter = close_reply_of(cmd)
    signal = SignalRequest(v["signal_name"], v["signal_input"], v["identity"], request_id) if with_signal else None
    current = ctx.workflows.find(v["workflow_id"])
    new_run_id = scheduled_run_id(ctx, scheduled_by) or run_ids.new_run_id()
    decision = resolve_duplicate_workflow_id(
        policies, workflow_id=v["workflow_id"], request_id=request_id, new_run_id=new_run_id,
        current=None if current is None else CurrentRun(
            current[1].run_id, current[1].status, current[1].start_request_id))
    if decision.action is _ALREADY_STARTED:
        ctx.out.reject(cmd, RejectionType.ALREADY_EXISTS, decision.message)
        _tell_parent(ctx, parent, WorkflowIntent.CHILD_START_FAILED, cause="WORKFLOW_ALREADY_EXISTS")
        tell_schedule_start_failed(ctx, scheduled_by, v["workflow_id"], decision.message)
        return
    if decision.action is _RETURN_EXISTING:
        run_key, run = current
        if signal is not None and run.is_open:
            if not signal_run(cmd, ctx, run_key, run, signal):
                return
            RunWriter(ctx, run_key, run).end_backoff_now()  # a signal-with-start does not wait for the run's time
            ctx.workflows.put(run_key, run)
        # A START sent again (or one that found the run it may use) waits on that run.
        waiting = None if waiter is None else wait_for_close(ctx, run_key, run, waiter) is not None
        _reply_started(ctx, run_key, run, started=decision.started, waiting=waiting)
        return
    if decision.action is _TERMINATE_EXISTING_AND_START:
        run_key, run = current
        RunWriter(ctx, run_key, run).terminate(decision.reason, decision.identity, details=decision.details)
        ctx.workflows.put(run_key, run)
    expiration = workflow_execution_expiration(to_datetime(ctx.now_ms), timeouts.execution)
    cron_schedule = v["cron_schedule"]  # a cron workflow's first run waits for its first time
    first_task_backoff = start_delay if start_delay is not None else first_run_backoff(cron_schedule, ctx.now_ms)
    run_key, run = start_run(ctx, RunStart(
        run_id=new_run_id, workflow_id=v["workflow_id"], workflow_type=v["workflow_type"],
        task_queue=v["task_queue"], input=v["input"], timeouts=timeouts,
        retry_policy=None if policy is None else policy_to_record(policy), attempt=1,
        execution_expiration_ms=to_ms(expiration), identity=v["identity"], request_id=request_id,
        parent=parent, cron_schedule=cron_schedule,
        initiator=_CRON_SCHEDULE if cron_schedule else _NO_INITIATOR,
        first_task_backoff_ms=ceil_ms(first_task_backoff),
        scheduled_by=scheduled_by, memo=attributes.get("memo"),
        search_attributes=attributes.get("search_attributes"),
        last_completion_result=attributes.get("last_completion_result"),
        continued_failure=attributes.get("continued_failure"),
        result_waiters=[] if waiter is None else [waiter]), signal)
    _reply_started(ctx, run_key, run, started=True, waiting=None if waiter is None else True)
    _tell_parent(ctx, parent, WorkflowIntent.CHILD_STARTED,
                 workflow_execution={"workflow_id": run.workflow_id, "run_id": run.run_id})


#: Normalized timeouts kept: a schedule's starts, or one client's, carry the same ones.
TIMEOUTS_KEPT = 256


@functools.lru_cache(maxsize=TIMEOUTS_KEPT, typed=True)
def _normalized_timeouts(execution_ms: int, run_ms: int, task_ms: int) -> WorkflowTimeouts:
    """The START's timeouts as its run keeps them (frozen, so shared); a refusal is raised
    each time, never kept."""
    return normalize_workflow_timeouts(WorkflowTimeouts(
        duration_from_ms(execution_ms), duration_from_ms(run_ms), duration_from_ms(task_ms)))


@functools.lru_cache(maxsize=64)
def _id_policies(reuse: str, conflict: str, with_signal: bool) -> WorkflowIdPolicies:
    """The START's workflow id policies by their names, resolved once per combination
    (frozen, so shared); a refusal is raised each time, never kept."""
    return normalize_workflow_id_policies(
        _enum(WorkflowIdReusePolicy, reuse, "id_reuse_policy"),
        _enum(WorkflowIdConflictPolicy, conflict, "id_conflict_policy"), signal_with_start=with_signal)


def _start_delay(v: dict) -> timedelta | None:
    """The START's `start_delay_ms` (Temporal's workflow_start_delay); None when not set."""
    delay_ms = v.get("start_delay_ms")
    return None if delay_ms is None else duration_from_ms(delay_ms)


def _tell_parent(ctx: ProcessingContext, parent: dict | None, intent: str, **attributes) -> None:
    """A child's start answers its parent's partition (nothing for a client's start)."""
    if parent is not None:
        ctx.out.command(WF, intent, -1, {"workflow_id": parent["workflow_id"], "run_id": parent["run_id"],
                                         "attributes": orjson.dumps({"initiated_event_id": parent["initiated_event_id"],
                                                                     **attributes}).decode()})


def _reply_started(ctx: ProcessingContext, run_key: int, run: WorkflowRun, started: bool,
                   waiting: bool | None) -> None:
    """STARTED; `waiting` (for a START with a close reply): whether its close will be sent
    there (False: the run had no room for another waiter, the client reads the events topic)."""
    if not ctx.out.caller_listens:  # (a schedule's or a parent's START): nobody to build it for
        return
    attributes = {"started": started} if waiting is None else {"started": started, "close_reply": waiting}
    ctx.out.reply(WF, WorkflowIntent.STARTED, run_key, {
        "workflow_id": run.workflow_id, "run_id": run.run_id, "workflow_type": run.workflow_type,
        "task_queue": run.task_queue, "attempt": run.attempt, "attributes": orjson.dumps(attributes).decode()})


def start_run(ctx: ProcessingContext, start: RunStart, signal: SignalRequest | None = None) -> tuple[int, WorkflowRun]:
    """A new run, current for its workflow id: WORKFLOW_EXECUTION_STARTED, the `signal` it
    was started with, its deadlines armed, and its first workflow task scheduled (or its
    backoff armed)."""
    run_key = ctx.keys.next_key()
    expiration_ms = start.execution_expiration_ms
    deadlines = workflow_run_deadlines(
        start.timeouts, start_time=to_datetime(ctx.now_ms),
        execution_expiration=to_datetime(expiration_ms) if expiration_ms else None,
        first_workflow_task_backoff=duration_from_ms(start.first_task_backoff_ms))
    run = WorkflowRun.begin(start, ctx.now_ms, run_expiration_ms=to_ms(deadlines.run_expiration),
                            execution_time_ms=to_ms(deadlines.execution_time))
    writer = RunWriter(ctx, run_key, run)
    writer.append(_EXECUTION_STARTED, {
        "workflow_id": run.workflow_id, "workflow_type": run.workflow_type, "task_queue": run.task_queue,
        "input": run.input, "workflow_execution_timeout_ms": run.timeouts.execution_ms,
        "workflow_run_timeout_ms": run.timeouts.run_ms, "workflow_task_timeout_ms": run.timeouts.task_ms,
        "attempt": run.attempt, "original_execution_run_id": run.run_id,
        "first_execution_run_id": run.first_execution_run_id,
        "continued_execution_run_id": start.continued_execution_run_id, "retry_policy": run.retry_policy,
        "identity": run.identity, "workflow_execution_expiration_time_ms": expiration_ms,
        "initiator": start.initiator.name, "first_workflow_task_backoff_ms": start.first_task_backoff_ms,
        "continued_failure": start.continued_failure,
        **({} if not start.cron_schedule else {"cron_schedule": start.cron_schedule}),
        **{name: value for name in ("last_completion_result", "memo", "search_attributes")
           if (value := getattr(start, name)) is not None},
        **({} if start.parent is None else {
            "parent_workflow_execution": {"workflow_id": start.parent["workflow_id"], "run_id": start.parent["run_id"]},
            "parent_initiated_event_id": start.parent["initiated_event_id"]})})
    if signal is not None:
        writer.append_all([signal.event(ctx, run_key, run)])
    if run.run_expiration_ms:
        kind = EXECUTION_TIME_OUT if run.run_expiration_ms == expiration_ms else RUN_TIME_OUT
        ctx.workflow_timers.arm(run_key, run, kind, run.run_expiration_ms)
    elif expiration_ms:
        ctx.workflow_timers.arm(run_key, run, EXECUTION_TIME_OUT, expiration_ms)
    if start.first_task_backoff_ms > 0:
        ctx.workflow_timers.arm(run_key, run, BACKOFF_START, run.execution_time_ms)
    else:
        writer.schedule_task()
    ctx.workflows.add(run_key, run)
    return run_key, run
