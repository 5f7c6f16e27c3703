"""Due-date commands of workflow runs: TIMER_FIRE, RUN_TIME_OUT, EXECUTION_TIME_OUT and
BACKOFF_START (SEMANTICS.md 3.2, 3.3). The checker may send one twice or late: each is
re-checked against the run and the deadline it names; a stale one is rejected.
"""

from __future__ import annotations

import uuid
from dataclasses import replace

from streamproc.engine.processing import ProcessingContext
from streamproc.engine.workflows import cron
from streamproc.engine.workflows.commands import next_run
from streamproc.engine.workflows.runs import (
    BACKOFF_START,
    EXECUTION_TIME_OUT,
    RUN_TIME_OUT,
    E,
    RunWriter,
)
from streamproc.protocol.failures import failure_to_record
from streamproc.protocol.records import Record, RejectionType
from streamproc.semantics.workflow_timeout_outcomes import (
    WorkflowTimedOut,
    fire_execution_timeout,
    fire_run_timeout,
    run_timeout_failure,
)
from streamproc.protocol.wire_values import policy_from_record, to_datetime, to_ms
from streamproc.state.workflow_run import WorkflowRun
from streamproc.state.workflow_run_parts import PendingEvent


def _open_run(cmd: Record, ctx: ProcessingContext, what: str) -> WorkflowRun | None:
    run = ctx.workflows.get(cmd.key)
    if run is not None and run.is_open:
        return run
    ctx.out.reject(cmd, RejectionType.NOT_FOUND if run is None else RejectionType.INVALID_STATE,
                   f"Expected to fire {what} due at {cmd.value['due_ms']} of run with key '{cmd.key}', "
                   f"but {'no such run exists' if run is None else 'the run is closed'}")
    return None


def _armed(cmd: Record, ctx: ProcessingContext, kind: str) -> WorkflowRun | None:
    run = _open_run(cmd, ctx, f"the {kind} deadline")
    if run is None:
        return None
    due = cmd.value["due_ms"]
    armed = run.deadlines.get(kind)
    if armed != due or due > ctx.now_ms:
        ctx.out.reject(cmd, RejectionType.INVALID_STATE,
                       f"Expected to fire the {kind} deadline due at {due} of run with key '{cmd.key}', "
                       f"but the armed one is {armed} (now {ctx.now_ms})")
        return None
    return run


def timer_fire(cmd: Record, ctx: ProcessingContext) -> None:
    timer_id, due = cmd.value["timer_id"], cmd.value["due_ms"]
    run = _open_run(cmd, ctx, f"timer {timer_id!r}")
    if run is None:
        return
    timer = run.timers.get(timer_id)
    if timer is None or timer.fired or timer.due_ms != due or due > ctx.now_ms:
        ctx.out.reject(cmd, RejectionType.INVALID_STATE,
                       f"Expected to fire timer {timer_id!r} due at {due} of run with key '{cmd.key}', "
                       f"but the timer is {timer.to_json() if timer else None} (now {ctx.now_ms})")
        return
    ctx.workflow_timers.remove_timer(cmd.key, run, timer_id)
    if run.task is not None:  # a CANCEL_TIMER in the task's answer may still win
        run.timers[timer_id] = replace(timer, fired=True)
    RunWriter(ctx, cmd.key, run).deliver([PendingEvent(E.TIMER_FIRED.name, {
        "timer_id": timer_id, "started_event_id": timer.started_event_id})])
    ctx.workflows.put(cmd.key, run)


def backoff_start(cmd: Record, ctx: ProcessingContext) -> None:
    """A retry, cron or delayed run's first-task backoff is over: its first workflow task."""
    run = _armed(cmd, ctx, BACKOFF_START)
    if run is None:
        return
    ctx.workflow_timers.disarm(cmd.key, run, BACKOFF_START)
    RunWriter(ctx, cmd.key, run).schedule_task()
    ctx.workflows.put(cmd.key, run)


def execution_time_out(cmd: Record, ctx: ProcessingContext) -> None:
    run = _armed(cmd, ctx, EXECUTION_TIME_OUT)
    if run is None:
        return
    _timed_out(cmd.key, run, fire_execution_timeout(workflow_task_started=run.task is not None), ctx)


def run_time_out(cmd: Record, ctx: ProcessingContext) -> None:
    run = _armed(cmd, ctx, RUN_TIME_OUT)
    if run is None:
        return
    expiration = run.execution_expiration_ms
    outcome = fire_run_timeout(
        policy_from_record(run.retry_policy) if run.retry_policy is not None else None,
        attempt=run.attempt, now=to_datetime(cmd.value["due_ms"]),
        execution_expiration=to_datetime(expiration) if expiration else None,
        previous_run_execution_time=to_datetime(run.execution_time_ms),
        workflow_task_started=run.task is not None, cron_backoff=cron.next_run_backoff(ctx, run))
    _timed_out(cmd.key, run, outcome, ctx)


def _timed_out(run_key: int, run: WorkflowRun, outcome: WorkflowTimedOut, ctx: ProcessingContext) -> None:
    """WORKFLOW_EXECUTION_TIMED_OUT (a task that is out failed first, then what was buffered),
    and the retry or cron run if any, with the last completion result this run was started
    with. A dispatched task counts as started (`force_close`)."""
    new_run_id = str(uuid.uuid4()) if outcome.new_run is not None else ""
    last_result = cron.started_with_completion_result(ctx, run_key) if outcome.new_run is not None else None
    RunWriter(ctx, run_key, run).force_close(
        outcome.status, E.WORKFLOW_EXECUTION_TIMED_OUT,
        {"retry_state": outcome.retry_state.name, "new_execution_run_id": new_run_id},
        fail_started_task=outcome.fail_started_workflow_task)
    if outcome.new_run is not None:
        next_run(ctx, run_key, run, new_run_id, outcome.new_run.initiator, attempt=outcome.new_run.attempt,
                 backoff_ms=to_ms(outcome.new_run.first_workflow_task_backoff),
                 continued_failure=failure_to_record(run_timeout_failure()), last_completion_result=last_result)
    ctx.workflows.put(run_key, run)
