"""Answers to the callers waiting on an update, at the stage each asked for.

A caller asks for ACCEPTED (answered once the validator accepted the update) or
COMPLETED (answered with the handler's result or failure). A rejected update, and one the
run closed without finishing, answers every waiter with UPDATE_REJECTED and a failure.
"""

from __future__ import annotations

from typing import Any

from streamproc.engine.processing import ProcessingContext
from streamproc.protocol.records import ValueType, WorkflowIntent
from streamproc.state.workflow_run import WorkflowRun
from streamproc.state.workflow_run_parts import RunUpdate

__all__ = ["ACCEPTED", "COMPLETED", "answer_waiters", "abort_updates", "update_failure"]

ACCEPTED, COMPLETED = "ACCEPTED", "COMPLETED"
#: Temporal's words for an update the run closed without completing.
ABORTED_BY_CLOSE = "Workflow Update failed because the Workflow completed before the Update completed."
CLOSED_BEFORE_ACCEPTED = "workflow execution already completed"


def update_failure(message: str, error_type: str = "") -> dict[str, Any]:
    return {"message": message, "kind": "APPLICATION", "type": error_type, "non_retryable": True}


def answer_waiters(ctx: ProcessingContext, run_key: int, run: WorkflowRun, update_id: str, update: RunUpdate,
                   intent: str, stages: tuple[str, ...], **value: Any) -> None:
    """Answer the waiters of `update` that wait for one of `stages`; the others keep waiting."""
    keep = []
    for request_id, reply_partition, stage in update.waiters:
        if stage in stages:
            ctx.out.answer(reply_partition, request_id, ValueType.WORKFLOW, intent, run_key, {
                "workflow_id": run.workflow_id, "run_id": run.run_id, "update_id": update_id,
                "update_name": update.name, **value})
        else:
            keep.append([request_id, reply_partition, stage])
    update.waiters = keep


def abort_updates(ctx: ProcessingContext, run_key: int, run: WorkflowRun) -> None:
    """The run closes: updates not completed fail for whoever waits, and are forgotten."""
    for update_id, update in list(run.updates.items()):
        if update.state == COMPLETED:
            continue
        message = ABORTED_BY_CLOSE if update.state == ACCEPTED else CLOSED_BEFORE_ACCEPTED
        answer_waiters(ctx, run_key, run, update_id, update, WorkflowIntent.UPDATE_REJECTED, (ACCEPTED, COMPLETED),
                       failure=update_failure(message, "AcceptedUpdateCompletedWorkflow"
                                              if update.state == ACCEPTED else "WorkflowExecutionAlreadyCompleted"))
        del run.updates[update_id]
