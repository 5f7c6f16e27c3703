"""What a closing run owes the workflows related to it (SEMANTICS.md 5, 6.2).

* Its parent hears of the child's end only when the child's chain of runs ends: a
  continue-as-new or a retry hands the parent over to the next run, which reports instead.
* Its children still open get the parent close policy, whenever the run closes
  (continue-as-new included): TERMINATE (reason "by parent close policy", identity
  history-service) or REQUEST_CANCEL, addressed by workflow id and the child's first run
  id, so a child that continued as new is still found and a gone one is left alone;
  ABANDON does nothing.

Each is a command to the other workflow's partition, committed with the close.
"""

from __future__ import annotations

from typing import Any

import orjson

from streamproc.engine.processing import ProcessingContext
from streamproc.engine.workflows.scheduled import tell_schedule_closed
from streamproc.protocol.records import ValueType, WorkflowIntent
from streamproc.semantics.workflow_events import EventType
from streamproc.semantics.workflow_ids import HISTORY_SERVICE_IDENTITY
from streamproc.state.workflow_run import WorkflowRun
from streamproc.state.workflow_run_parts import RunChild

__all__ = ["on_run_closed", "apply_parent_close_policy", "PARENT_CLOSE_REASON"]

PARENT_CLOSE_REASON = "by parent close policy"

#: The parent's event for each way a child's chain can end.
CHILD_CLOSE_EVENTS = {
    EventType.WORKFLOW_EXECUTION_COMPLETED: EventType.CHILD_WORKFLOW_EXECUTION_COMPLETED,
    EventType.WORKFLOW_EXECUTION_FAILED: EventType.CHILD_WORKFLOW_EXECUTION_FAILED,
    EventType.WORKFLOW_EXECUTION_CANCELED: EventType.CHILD_WORKFLOW_EXECUTION_CANCELED,
    EventType.WORKFLOW_EXECUTION_TIMED_OUT: EventType.CHILD_WORKFLOW_EXECUTION_TIMED_OUT,
    EventType.WORKFLOW_EXECUTION_TERMINATED: EventType.CHILD_WORKFLOW_EXECUTION_TERMINATED,
}
#: The attributes of the child's close event the parent's event repeats.
_CARRIED = ("result", "failure", "details", "retry_state")


def on_run_closed(ctx: ProcessingContext, run: WorkflowRun, event_type: EventType, attributes: dict[str, Any]) -> None:
    """`run` just wrote its close event `event_type` with `attributes`."""
    tell_schedule_closed(ctx, run, event_type, attributes)
    for initiated_id, child in run.children.items():
        if not child.closed and child.run_id:
            apply_parent_close_policy(ctx, child)
    chain_ends = event_type in CHILD_CLOSE_EVENTS and not attributes.get("new_execution_run_id")
    if run.parent is not None and chain_ends:
        parent = run.parent
        ctx.out.command(ValueType.WORKFLOW, WorkflowIntent.CHILD_CLOSED, -1, {
            "workflow_id": parent["workflow_id"], "run_id": parent["run_id"],
            "attributes": orjson.dumps({
                "initiated_event_id": parent["initiated_event_id"],
                "event_type": CHILD_CLOSE_EVENTS[event_type].name,
                "workflow_execution": {"workflow_id": run.workflow_id, "run_id": run.run_id},
                "workflow_type": run.workflow_type,
                **{k: attributes[k] for k in _CARRIED if k in attributes}}).decode()})


def apply_parent_close_policy(ctx: ProcessingContext, child: RunChild) -> None:
    """TERMINATE or REQUEST_CANCEL the child's chain (found by its first run id); ABANDON: nothing."""
    if child.parent_close_policy == "ABANDON":
        return
    intent = WorkflowIntent.TERMINATE if child.parent_close_policy == "TERMINATE" else WorkflowIntent.REQUEST_CANCEL
    ctx.out.command(ValueType.WORKFLOW, intent, -1, {
        "workflow_id": child.workflow_id, "run_id": "", "reason": PARENT_CLOSE_REASON,
        "identity": HISTORY_SERVICE_IDENTITY,
        "attributes": orjson.dumps({"first_execution_run_id": child.run_id}).decode()})
