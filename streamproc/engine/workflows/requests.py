"""Client requests about a running or closed workflow: REQUEST_CANCEL, TERMINATE, DESCRIBE,
GET_HISTORY, WAIT_RESULT. A request names the workflow id and a run id ("" = the current run)."""

from __future__ import annotations

import orjson

from streamproc.engine.processing import ProcessingContext
from streamproc.engine.workflows.senders import answer_sender, command_attributes, external_sender, refused_child_only
from streamproc.engine.workflows.result_waiters import (
    MAX_RESULT_WAITERS,
    close_reply_of,
    close_reply_problem,
    wait_for_close,
)
from streamproc.engine.workflows.runs import WF, E, RunWriter, history_pages
from streamproc.protocol.records import Record, RejectionType, WorkflowIntent
from streamproc.protocol.wire_values import to_ms
from streamproc.state.workflow_run import WorkflowRun
from streamproc.state.workflow_run_parts import PendingEvent, RunActivity


def find_run(cmd: Record, ctx: ProcessingContext, *, running: bool) -> tuple[int, WorkflowRun] | None:
    """The run a request names (run_id "" = the current one; a parent close policy's names
    the chain by its first run id instead), or None after rejecting the request."""
    v = cmd.value
    found = ctx.workflows.find(v["workflow_id"], v["run_id"])
    first_run_id = command_attributes(cmd).get("first_execution_run_id")
    if first_run_id and found is not None and found[1].first_execution_run_id != first_run_id:
        found = None
    if found is None:
        ctx.out.reject(cmd, RejectionType.NOT_FOUND,
                       f"workflow execution not found: WorkflowId {v['workflow_id']!r}, RunId {v['run_id']!r}")
    elif running and not found[1].is_open:
        ctx.out.reject(cmd, RejectionType.INVALID_STATE,
                       f"workflow execution already completed: WorkflowId {v['workflow_id']!r}, "
                       f"RunId {found[1].run_id!r}, status {found[1].status.name}")
    else:
        return found
    return None


def valid_run(cmd: Record, ctx: ProcessingContext, problem: str | None, *,
              running: bool) -> tuple[int, WorkflowRun] | None:
    """The run a well-formed request names: `problem` (what is wrong with its fields, or
    None) rejects it as an invalid argument first."""
    if problem:
        ctx.out.reject(cmd, RejectionType.INVALID_ARGUMENT, problem)
        return None
    return find_run(cmd, ctx, running=running)


def find_target(cmd: Record, ctx: ProcessingContext, sender: dict | None,
                failed: str) -> tuple[int, WorkflowRun] | None:
    """The open run a request names; for one from another workflow (`sender`), a run that
    may take it (a child-only request needs the sender's child), else the sender hears
    `failed`. None after rejecting the request."""
    found = find_run(cmd, ctx, running=True)
    if found is not None and sender is not None and refused_child_only(sender, found[1]):
        ctx.out.reject(cmd, RejectionType.NOT_FOUND, f"workflow {found[1].workflow_id!r} is not a child of "
                                                     f"{sender['workflow_id']!r}")
        found = None
    if found is None and sender is not None:
        answer_sender(ctx, sender, failed, None, cmd)
    return found


def _reply_event(ctx: ProcessingContext, run_key: int, run: WorkflowRun, event_type: E, attributes: dict) -> None:
    ctx.out.reply(WF, event_type.name, run_key, {
        "workflow_id": run.workflow_id, "run_id": run.run_id,
        "attributes": orjson.dumps(attributes).decode()})


def request_cancel(cmd: Record, ctx: ProcessingContext) -> None:
    """WORKFLOW_EXECUTION_CANCEL_REQUESTED and a workflow task: the workflow decides. A
    request from another workflow is answered to it (a repeated one counts as done, as
    Temporal: the cancellation was requested)."""
    sender = external_sender(cmd)
    found = find_target(cmd, ctx, sender, WorkflowIntent.EXTERNAL_CANCEL_FAILED)
    if found is None:
        return
    run_key, run = found
    if sender is not None:
        answer_sender(ctx, sender, WorkflowIntent.EXTERNAL_CANCEL_REQUESTED, run, cmd)
    if run.cancel_requested:
        ctx.out.reject(cmd, RejectionType.INVALID_STATE,
                       f"cancellation of workflow {run.workflow_id!r} run {run.run_id!r} was already requested")
        return
    run.cancel_requested = True
    attributes = {"cause": cmd.value["reason"], "identity": cmd.value["identity"]}
    if sender is not None:
        attributes.update(external_initiated_event_id=sender["initiated_event_id"], external_workflow_execution={
            "workflow_id": sender["workflow_id"], "run_id": sender["run_id"]})
    writer = RunWriter(ctx, run_key, run)
    writer.deliver([PendingEvent(E.WORKFLOW_EXECUTION_CANCEL_REQUESTED.name, attributes)])
    writer.end_backoff_now()  # the workflow decides now, not at the run's time
    ctx.workflows.put(run_key, run)
    _reply_event(ctx, run_key, run, E.WORKFLOW_EXECUTION_CANCEL_REQUESTED, attributes)


def terminate_request(cmd: Record, ctx: ProcessingContext) -> None:
    found = find_run(cmd, ctx, running=True)
    if found is None:
        return
    run_key, run = found
    RunWriter(ctx, run_key, run).terminate(cmd.value["reason"], cmd.value["identity"])
    ctx.workflows.put(run_key, run)
    _reply_event(ctx, run_key, run, E.WORKFLOW_EXECUTION_TERMINATED,
                 {"reason": cmd.value["reason"], "identity": cmd.value["identity"]})


def describe(cmd: Record, ctx: ProcessingContext) -> None:
    found = find_run(cmd, ctx, running=False)
    if found is None:
        return
    run_key, run = found
    description = {
        "workflow_id": run.workflow_id, "run_id": run.run_id, "workflow_type": run.workflow_type,
        "task_queue": run.task_queue, "status": run.status.name, "attempt": run.attempt,
        "start_time_ms": run.start_time_ms, "execution_time_ms": run.execution_time_ms,
        "close_time_ms": run.close_time_ms, "history_length": run.next_event_id - 1,
        "history_size_bytes": run.history_size_bytes,
        "first_execution_run_id": run.first_execution_run_id,
        "new_execution_run_id": run.new_execution_run_id, "workflow_timeouts_ms": run.timeouts.to_json(),
        "execution_expiration_ms": run.execution_expiration_ms,
        "run_expiration_ms": run.run_expiration_ms,
        "pending_workflow_task": run.task.to_json() if run.task is not None else None,
        "pending_activities": [_pending_activity(ctx, scheduled_id, entry)
                               for scheduled_id, entry in run.pending_activities().items()],
        "pending_timers": [{"timer_id": timer_id, "started_event_id": t.started_event_id, "due_ms": t.due_ms}
                           for timer_id, t in run.pending_timers().items()],
        **{name: value for name in ("memo", "search_attributes") if (value := getattr(run, name)) is not None},
    }
    ctx.out.reply(WF, WorkflowIntent.DESCRIBED, run_key, {
        "workflow_id": run.workflow_id, "run_id": run.run_id, "workflow_type": run.workflow_type,
        "task_queue": run.task_queue, "attributes": orjson.dumps(description).decode()})


def _pending_activity(ctx: ProcessingContext, scheduled_id: int, entry: RunActivity) -> dict:
    info = {"activity_id": entry.activity_id, "activity_type": entry.activity_type,
            "scheduled_event_id": scheduled_id, "cancel_requested": entry.cancel_requested}
    found = ctx.activities.get(entry.key)
    if found is not None:
        state = found[1]
        failure = state.last_failure
        info.update(attempt=state.attempt, state="STARTED" if state.started_time else "SCHEDULED",
                    last_started_ms=to_ms(state.started_time) if state.started_time else None,
                    last_heartbeat_ms=to_ms(state.last_heartbeat_time) if state.last_heartbeat_time else None,
                    # what the last attempt failed with: Temporal's describe shows it as LastFailure
                    last_failure=None if failure is None else {"message": failure.message,
                                                               "type": getattr(failure, "type", "") or
                                                               type(failure).__name__})
    return info


def get_history(cmd: Record, ctx: ProcessingContext) -> None:
    """The run's whole history as HISTORY_PAGE replies, pages of the task page size."""
    found = find_run(cmd, ctx, running=False)
    if found is None:
        return
    run_key, run = found
    pages = history_pages(ctx, run_key, 1, run.next_event_id - 1)
    for page, history in enumerate(pages):
        ctx.out.reply(WF, WorkflowIntent.HISTORY_PAGE, run_key, {
            "workflow_id": run.workflow_id, "run_id": run.run_id,
            "attributes": orjson.dumps({"status": run.status.name}).decode(), "history": history, "page": page, "pages": len(pages)})


def wait_result(cmd: Record, ctx: ProcessingContext) -> None:
    """WAIT_RESULT: the close of the run named goes to the command's `close_reply`, when it
    comes or now (`result_waiters.py`); RESULT_WAIT_ACCEPTED says which run and whether it
    was closed."""
    waiter = close_reply_of(cmd)
    problem = close_reply_problem(cmd) or (
        None if waiter is not None else "WAIT_RESULT needs a close_reply: where to send the run's close")
    found = valid_run(cmd, ctx, problem, running=False)
    if found is None:
        return
    run_key, run = found
    waited = wait_for_close(ctx, run_key, run, waiter)
    if waited is None:
        ctx.out.reject(cmd, RejectionType.RESOURCE_EXHAUSTED,
                       f"workflow {run.workflow_id!r} run {run.run_id!r} already has {MAX_RESULT_WAITERS} clients "
                       f"waiting for its result")
        return
    waited_run, closed = waited
    ctx.out.reply(WF, WorkflowIntent.RESULT_WAIT_ACCEPTED, run_key, {
        "workflow_id": run.workflow_id, "run_id": waited_run.run_id,
        "attributes": orjson.dumps({"run_id": waited_run.run_id, "closed": closed}).decode()})
