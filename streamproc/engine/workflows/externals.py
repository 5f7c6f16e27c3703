"""Signals and cancel requests a workflow sends to another workflow (SEMANTICS.md 6.1, events
22-24 and 37-39), on any partition.

SIGNAL_EXTERNAL_WORKFLOW_EXECUTION writes SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED and a
SIGNAL command to the target's partition (request id `<run id>/<initiated event id>`, so
it is recorded once); the target's partition answers with EXTERNAL_SIGNALED or
EXTERNAL_SIGNAL_FAILED, and the sender's history gets EXTERNAL_WORKFLOW_EXECUTION_SIGNALED
or SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_FAILED (cause EXTERNAL_WORKFLOW_EXECUTION_NOT_FOUND).
REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION goes the same way with REQUEST_CANCEL. Every
hop is a command committed with the step that decided it: a crash loses or repeats none.
"""

from __future__ import annotations

from typing import Any

import orjson

from streamproc.engine.processing import ProcessingContext
from streamproc.engine.validation import check_json
from streamproc.engine.workflows.requests import find_run
from streamproc.engine.workflows.senders import command_attributes
from streamproc.engine.workflows.runs import WF, E, RunWriter
from streamproc.protocol.records import Record, RejectionType, WorkflowIntent
from streamproc.semantics import InvalidArgument
from streamproc.state.workflow_run import WorkflowRun
from streamproc.state.workflow_run_parts import PendingEvent

__all__ = ["check_signal_external", "check_cancel_external", "signal_external", "cancel_external",
           "external_signaled", "external_signal_failed", "external_cancel_requested", "external_cancel_failed",
           "NOT_FOUND_CAUSE"]

NOT_FOUND_CAUSE = "EXTERNAL_WORKFLOW_EXECUTION_NOT_FOUND"
_SIGNAL, _CANCEL = "SIGNAL", "CANCEL"


def _target(c: dict) -> tuple[str, str]:
    workflow_id, run_id = c.get("workflow_id"), c.get("run_id") or ""
    if not workflow_id or not isinstance(workflow_id, str):
        raise InvalidArgument("WorkflowId is not set on command.")
    if not isinstance(run_id, str):
        raise InvalidArgument(f"run_id must be a string, got {run_id!r}")
    return workflow_id, run_id


def check_signal_external(ctx: ProcessingContext, run: WorkflowRun, c: dict, still_open: Any) -> dict[str, Any]:
    workflow_id, run_id = _target(c)
    if not c.get("signal_name") or not isinstance(c["signal_name"], str):
        raise InvalidArgument("SignalName is not set on command.")
    problem = check_json(c.get("input") if c.get("input") is not None else "null", "signal input",
                         ctx.limits.max_payload_bytes)
    if problem:
        raise InvalidArgument(problem)
    return {"namespace": "", "workflow_execution": {"workflow_id": workflow_id, "run_id": run_id},
            "workflow_id": workflow_id, "signal_name": c["signal_name"], "input": c.get("input"), "control": "",
            "child_workflow_only": c.get("child_workflow_only") is True}


def check_cancel_external(ctx: ProcessingContext, run: WorkflowRun, c: dict, still_open: Any) -> dict[str, Any]:
    workflow_id, run_id = _target(c)
    return {"namespace": "", "workflow_execution": {"workflow_id": workflow_id, "run_id": run_id},
            "workflow_id": workflow_id, "control": "", "child_workflow_only": c.get("child_workflow_only") is True,
            "reason": c.get("reason") or ""}


def _sender(run: WorkflowRun, initiated_id: int, child_only: bool) -> str:
    return orjson.dumps({"external": {"workflow_id": run.workflow_id, "run_id": run.run_id,
                                      "initiated_event_id": initiated_id, "child_workflow_only": child_only}}).decode()


def signal_external(w: RunWriter, a: dict, completed_id: int, eager_for: str | None) -> bool:
    return _initiate(w, a, completed_id, E.SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED, _SIGNAL,
                     WorkflowIntent.SIGNAL, {"signal_name": a["signal_name"], "input": a["input"]})


def cancel_external(w: RunWriter, a: dict, completed_id: int, eager_for: str | None) -> bool:
    return _initiate(w, a, completed_id, E.REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED,
                     _CANCEL, WorkflowIntent.REQUEST_CANCEL, {"reason": a["reason"]})


def _initiate(w: RunWriter, a: dict, completed_id: int, initiated_type: E, kind: str, intent: WorkflowIntent,
              request: dict[str, Any]) -> bool:
    """Write the INITIATED event, remember that it waits for an answer of `kind`, and send
    `intent` with `request` to the target's partition, recorded once (its request id is
    `<run id>/<initiated event id>`)."""
    run = w.run
    initiated = w.append(initiated_type, {**a, "workflow_task_completed_event_id": completed_id})
    run.externals[initiated] = kind
    target = a["workflow_execution"]
    w.ctx.out.command(WF, intent, -1, {
        "workflow_id": target["workflow_id"], "run_id": target["run_id"], **request, "identity": "",
        "attributes": _sender(run, initiated, a["child_workflow_only"])}, request_id=f"{run.run_id}/{initiated}")
    return False


# -- back on the sender's partition --------------------------------------------------------

def _answered(cmd: Record, ctx: ProcessingContext, kind: str, event: E, **extra: Any) -> None:
    found = find_run(cmd, ctx, running=True)
    if found is None:
        return  # the sender closed meanwhile: nothing waits for the answer
    run_key, run = found
    answer = command_attributes(cmd)
    initiated = answer.get("initiated_event_id")
    if run.externals.get(initiated) != kind:
        ctx.out.reject(cmd, RejectionType.INVALID_STATE, f"no {kind.lower()} request {initiated!r} is waiting "
                                                         f"for an answer in run {run.run_id!r}")
        return
    del run.externals[initiated]
    RunWriter(ctx, run_key, run).deliver([PendingEvent(event.name, {
        "initiated_event_id": initiated, "namespace": "", "workflow_execution": answer["workflow_execution"],
        "control": "", **extra})])
    ctx.workflows.put(run_key, run)


def external_signaled(cmd: Record, ctx: ProcessingContext) -> None:
    _answered(cmd, ctx, _SIGNAL, E.EXTERNAL_WORKFLOW_EXECUTION_SIGNALED)


def external_signal_failed(cmd: Record, ctx: ProcessingContext) -> None:
    _answered(cmd, ctx, _SIGNAL, E.SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_FAILED, cause=NOT_FOUND_CAUSE,
              workflow_task_completed_event_id=0)


def external_cancel_requested(cmd: Record, ctx: ProcessingContext) -> None:
    _answered(cmd, ctx, _CANCEL, E.EXTERNAL_WORKFLOW_EXECUTION_CANCEL_REQUESTED)


def external_cancel_failed(cmd: Record, ctx: ProcessingContext) -> None:
    _answered(cmd, ctx, _CANCEL, E.REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_FAILED, cause=NOT_FOUND_CAUSE,
              workflow_task_completed_event_id=0)
