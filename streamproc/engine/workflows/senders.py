"""Who sent a command that another partition's engine wrote, and how to answer it.

A workflow's SIGNAL or REQUEST_CANCEL to another workflow, and a parent close policy's
TERMINATE or REQUEST_CANCEL, carry JSON `attributes` saying who sent them (`external`:
workflow id, run id, initiated event id) or which chain they mean
(`first_execution_run_id`). The target's partition answers the sender with a command of
its own (`externals.py` handles it there).
"""

from __future__ import annotations

import orjson

from streamproc.engine.processing import ProcessingContext
from streamproc.protocol.records import Record, ValueType
from streamproc.state.workflow_run import WorkflowRun

__all__ = ["command_attributes", "external_sender", "refused_child_only", "answer_sender"]


def command_attributes(cmd: Record) -> dict:
    """The JSON `attributes` of a command (what another partition's engine adds to it)."""
    text = cmd.value.get("attributes")
    try:
        parsed = orjson.loads(text) if text else {}
    except orjson.JSONDecodeError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def external_sender(cmd: Record) -> dict | None:
    """The workflow that sent this SIGNAL / REQUEST_CANCEL, if a workflow did."""
    return command_attributes(cmd).get("external")


def refused_child_only(sender: dict, run: WorkflowRun) -> bool:
    """A child-only request whose target is not the sender's child."""
    parent = run.parent or {}
    return bool(sender.get("child_workflow_only")) and parent.get("workflow_id") != sender["workflow_id"]


def answer_sender(ctx: ProcessingContext, sender: dict, intent: str, target: WorkflowRun | None, cmd: Record) -> None:
    """Tell the sending workflow's partition how its request went."""
    ctx.out.command(ValueType.WORKFLOW, intent, -1, {
        "workflow_id": sender["workflow_id"], "run_id": sender["run_id"],
        "attributes": orjson.dumps({"initiated_event_id": sender["initiated_event_id"], "workflow_execution": {
            "workflow_id": cmd.value["workflow_id"],
            "run_id": target.run_id if target is not None else cmd.value["run_id"]}}).decode()})
