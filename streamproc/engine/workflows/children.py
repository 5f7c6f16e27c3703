"""Child workflows (SEMANTICS.md 5, 6.1 events 29-36, 6.2), on any partition.

START_CHILD_WORKFLOW_EXECUTION writes START_CHILD_WORKFLOW_EXECUTION_INITIATED and a START
command to the child's partition, carrying the parent (`attributes.parent`) and the
request id `<parent run id>/<initiated event id>`. The child's partition starts it
(conflict policy FAIL: a running id fails the start) and answers CHILD_STARTED or
CHILD_START_FAILED; the parent's history gets CHILD_WORKFLOW_EXECUTION_STARTED or
START_CHILD_WORKFLOW_EXECUTION_FAILED (WORKFLOW_ALREADY_EXISTS). When the child's chain of
runs ends (`relatives.py`), CHILD_CLOSED brings its close to the parent as
CHILD_WORKFLOW_EXECUTION_COMPLETED / FAILED / CANCELED / TIMED_OUT / TERMINATED. The
parent close policy is applied to the children still open whenever the parent closes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from streamproc.engine.processing import ProcessingContext
from streamproc.engine.validation import check_json
from streamproc.engine.workflows.relatives import apply_parent_close_policy
from streamproc.engine.workflows.requests import find_run
from streamproc.engine.workflows.runs import WF, E, RunWriter
from streamproc.engine.workflows.senders import command_attributes
from streamproc.protocol.records import Record, RejectionType, WorkflowIntent
from streamproc.protocol.topics import check_task_queue
from streamproc.protocol.wire_values import policy_from_record, policy_to_record, to_datetime, to_ms
from streamproc.semantics import InvalidArgument, normalize_workflow_retry_policy
from streamproc.semantics.cron_workflow import validate_cron_schedule
from streamproc.semantics.workflow_ids import WorkflowIdReusePolicy, validate_workflow_id
from streamproc.semantics.workflow_timeouts import WorkflowTimeouts, normalize_workflow_timeouts
from streamproc.state.workflow_run import WorkflowRun
from streamproc.state.workflow_run_parts import PendingEvent, RunChild
from streamproc.protocol.wire_values import duration_from_ms

__all__ = ["check_start_child", "start_child", "child_started", "child_start_failed", "child_closed",
           "PARENT_CLOSE_POLICIES", "ALREADY_EXISTS_CAUSE"]

PARENT_CLOSE_POLICIES = ("TERMINATE", "REQUEST_CANCEL", "ABANDON")
ALREADY_EXISTS_CAUSE = "WORKFLOW_ALREADY_EXISTS"


def check_start_child(ctx: ProcessingContext, run: WorkflowRun, c: dict, still_open: Any) -> dict[str, Any]:
    workflow_id = c.get("workflow_id")
    if not workflow_id or not isinstance(workflow_id, str):
        raise InvalidArgument("WorkflowId is not set on command.")
    validate_workflow_id(workflow_id, max_length=ctx.limits.history.max_id_length)
    if not c.get("workflow_type") or not isinstance(c["workflow_type"], str):
        raise InvalidArgument("WorkflowType is not set on command.")
    queue = c.get("task_queue") or run.task_queue
    problem = check_task_queue(queue) or check_json(c.get("input") if c.get("input") is not None else "null",
                                                    "input", ctx.limits.max_payload_bytes)
    if problem:
        raise InvalidArgument(problem)
    timeouts = normalize_workflow_timeouts(WorkflowTimeouts(*(duration_from_ms(c.get(f) or 0) for f in (
        "workflow_execution_timeout_ms", "workflow_run_timeout_ms", "workflow_task_timeout_ms"))))
    policy = c.get("retry_policy")
    if policy is not None:
        policy = policy_to_record(normalize_workflow_retry_policy(policy_from_record(policy)))
    reuse = c.get("workflow_id_reuse_policy") or "ALLOW_DUPLICATE"
    if reuse not in WorkflowIdReusePolicy.__members__ or reuse in ("UNSPECIFIED", "TERMINATE_IF_RUNNING"):
        raise InvalidArgument(f"workflow_id_reuse_policy must be one of ALLOW_DUPLICATE, "
                              f"ALLOW_DUPLICATE_FAILED_ONLY, REJECT_DUPLICATE, got {reuse!r}")
    close_policy = c.get("parent_close_policy") or "TERMINATE"
    if close_policy not in PARENT_CLOSE_POLICIES:
        raise InvalidArgument(f"parent_close_policy must be one of {', '.join(PARENT_CLOSE_POLICIES)}, "
                              f"got {close_policy!r}")
    cron_schedule = c.get("cron_schedule") or ""
    try:
        validate_cron_schedule(cron_schedule, to_datetime(ctx.now_ms))
    except InvalidArgument as exc:  # Temporal names the command it came with
        raise InvalidArgument(f"invalid CronSchedule on StartChildWorkflowExecutionCommand: {exc}") from None
    problem = ctx.admit_task_queue(queue)
    if problem:
        raise InvalidArgument(problem)
    return {"namespace": "", "workflow_id": workflow_id, "workflow_type": c["workflow_type"], "task_queue": queue,
            "input": c.get("input"), "workflow_execution_timeout_ms": to_ms(timeouts.execution),
            "workflow_run_timeout_ms": to_ms(timeouts.run), "workflow_task_timeout_ms": to_ms(timeouts.task),
            "parent_close_policy": close_policy, "workflow_id_reuse_policy": reuse, "retry_policy": policy,
            "control": "", **({"cron_schedule": cron_schedule} if cron_schedule else {})}


def start_child(w: RunWriter, a: dict, completed_id: int, eager_for: str | None) -> bool:
    ctx, run = w.ctx, w.run
    initiated = w.append(E.START_CHILD_WORKFLOW_EXECUTION_INITIATED,
                         {**a, "workflow_task_completed_event_id": completed_id})
    run.children[initiated] = RunChild(a["workflow_id"], a["workflow_type"], a["parent_close_policy"])
    ctx.out.command(WF, WorkflowIntent.START, -1, {
        "workflow_id": a["workflow_id"], "workflow_type": a["workflow_type"], "task_queue": a["task_queue"],
        "input": a["input"], "workflow_execution_timeout_ms": a["workflow_execution_timeout_ms"],
        "workflow_run_timeout_ms": a["workflow_run_timeout_ms"],
        "workflow_task_timeout_ms": a["workflow_task_timeout_ms"], "retry_policy": a["retry_policy"],
        "id_reuse_policy": a["workflow_id_reuse_policy"], "id_conflict_policy": "FAIL", "identity": "",
        "cron_schedule": a.get("cron_schedule", ""),
        "attributes": orjson.dumps({"parent": {"workflow_id": run.workflow_id, "run_id": run.run_id,
                                               "initiated_event_id": initiated}}).decode()},
        request_id=f"{run.run_id}/{initiated}")
    return False


# -- the child's partition answers; on the parent's partition --------------------------------

def _parent_and_child(cmd: Record, ctx: ProcessingContext) -> tuple[int, WorkflowRun, int, RunChild] | None:
    found = find_run(cmd, ctx, running=False)
    if found is None:
        return None
    run_key, run = found
    initiated = command_attributes(cmd).get("initiated_event_id")
    child = run.children.get(initiated)
    if child is None:
        ctx.out.reject(cmd, RejectionType.INVALID_STATE,
                       f"run {run.run_id!r} has no child workflow initiated by event {initiated!r}")
        return None
    return run_key, run, initiated, child


def _reported_by_child(handle: Callable[[Record, ProcessingContext, int, WorkflowRun, int, RunChild], None]
                       ) -> Callable[[Record, ProcessingContext], None]:
    """A processor for what a child's chain reports to its parent: finds the parent's run and
    the child (else rejects the command), lets `handle(cmd, ctx, run_key, run, initiated,
    child)` record it, and stores the run."""
    def process(cmd: Record, ctx: ProcessingContext) -> None:
        found = _parent_and_child(cmd, ctx)
        if found is None:
            return
        handle(cmd, ctx, *found)
        run_key, run, _, _ = found
        ctx.workflows.put(run_key, run)
    process.__name__ = process.__qualname__ = handle.__name__
    process.__doc__ = handle.__doc__
    return process


@_reported_by_child
def child_started(cmd: Record, ctx: ProcessingContext, run_key: int, run: WorkflowRun, initiated: int,
                  child: RunChild) -> None:
    started = command_attributes(cmd)
    child.run_id = started["workflow_execution"]["run_id"]
    if not run.is_open:
        # The parent closed before its child started: its close policy applies now.
        apply_parent_close_policy(ctx, child)
        del run.children[initiated]
    else:
        RunWriter(ctx, run_key, run).deliver([PendingEvent(E.CHILD_WORKFLOW_EXECUTION_STARTED.name, {
            "namespace": "", "initiated_event_id": initiated, "workflow_execution": started["workflow_execution"],
            "workflow_type": child.workflow_type})])


@_reported_by_child
def child_start_failed(cmd: Record, ctx: ProcessingContext, run_key: int, run: WorkflowRun, initiated: int,
                       child: RunChild) -> None:
    if not run.is_open:
        del run.children[initiated]
    else:
        child.closed = True
        RunWriter(ctx, run_key, run).deliver([PendingEvent(E.START_CHILD_WORKFLOW_EXECUTION_FAILED.name, {
            "namespace": "", "workflow_id": child.workflow_id, "workflow_type": child.workflow_type,
            "cause": command_attributes(cmd).get("cause") or ALREADY_EXISTS_CAUSE, "control": "",
            "initiated_event_id": initiated, "workflow_task_completed_event_id": 0})])


@_reported_by_child
def child_closed(cmd: Record, ctx: ProcessingContext, run_key: int, run: WorkflowRun, initiated: int,
                 child: RunChild) -> None:
    closed = command_attributes(cmd)
    if not run.is_open:
        del run.children[initiated]  # an abandoned child outlived its parent
    else:
        child.closed = True
        event_type = closed.pop("event_type")
        RunWriter(ctx, run_key, run).deliver([PendingEvent(event_type, {"namespace": "", **closed})])
