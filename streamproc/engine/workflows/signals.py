"""SIGNAL: a message for a running workflow, recorded as WORKFLOW_EXECUTION_SIGNALED.

The event is written (or buffered while a workflow task is out, then written after it,
followed by a new task) before the sender is answered, so an acknowledged signal is
never lost. A signal sent again with the same request id (a client across a broker
outage) is answered SIGNALED again and not applied twice. A signal to a closed run
is refused as Temporal refuses it; a run records at most `Limits.max_signals_per_run`.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamproc.engine.processing import ProcessingContext
from streamproc.engine.validation import check_json
from streamproc.engine.workflows.requests import find_target
from streamproc.engine.workflows.senders import answer_sender, external_sender
from streamproc.engine.workflows.runs import WF, E, RunWriter
from streamproc.protocol.records import Record, RejectionType, WorkflowIntent
from streamproc.state.workflow_run import WorkflowRun
from streamproc.state.workflow_run_parts import PendingEvent

__all__ = ["SignalRequest", "check_signal", "signal", "signal_run", "reply_signaled"]

#: Temporal's message when a run has recorded as many signals as it may.
SIGNAL_LIMIT_MESSAGE = "exceeded workflow execution limit for signal events"


def check_signal(ctx: ProcessingContext, name: str, signal_input: str | None) -> str | None:
    """Why a signal with this name and input may not be sent, or None."""
    if not name:
        return "SignalName is not set on request."
    return check_json(signal_input if signal_input is not None else "null", "signal input",
                      ctx.limits.max_payload_bytes)


@dataclass(frozen=True, slots=True)
class SignalRequest:
    """A signal as a SIGNAL or a signal-with-start START carries it."""

    name: str
    input: str | None
    identity: str
    request_id: str
    #: The workflow that sent it (workflow_id, run_id), if a workflow did.
    external: dict | None = None

    def event(self, ctx: ProcessingContext, run_key: int, run: WorkflowRun) -> PendingEvent:
        """Count the signal, remember its request id; the WORKFLOW_EXECUTION_SIGNALED to deliver."""
        run.signal_count += 1
        ctx.workflows.record_signal_request(run_key, self.request_id)
        return PendingEvent(E.WORKFLOW_EXECUTION_SIGNALED.name, {
            "signal_name": self.name, "input": self.input, "identity": self.identity,
            "external_workflow_execution": self.external})


def signal(cmd: Record, ctx: ProcessingContext) -> None:
    v = cmd.value
    problem = check_signal(ctx, v["signal_name"], v["input"])
    if problem:
        ctx.out.reject(cmd, RejectionType.INVALID_ARGUMENT, problem)
        return
    sender = external_sender(cmd)  # another workflow, which is answered on its partition
    found = find_target(cmd, ctx, sender, WorkflowIntent.EXTERNAL_SIGNAL_FAILED)
    if found is None:
        return
    run_key, run = found
    external = None if sender is None else {"workflow_id": sender["workflow_id"], "run_id": sender["run_id"]}
    request = SignalRequest(v["signal_name"], v["input"], v["identity"], cmd.request_id or "", external)
    if signal_run(cmd, ctx, run_key, run, request):
        reply_signaled(ctx, run_key, run, request.name)
        if sender is not None:
            answer_sender(ctx, sender, WorkflowIntent.EXTERNAL_SIGNALED, run, cmd)
    elif sender is not None:
        answer_sender(ctx, sender, WorkflowIntent.EXTERNAL_SIGNAL_FAILED, run, cmd)


def signal_run(cmd: Record, ctx: ProcessingContext, run_key: int, run: WorkflowRun, request: SignalRequest) -> bool:
    """Deliver `request` to the open run (once per request id); False after rejecting `cmd`
    (the run recorded as many signals as it may)."""
    if ctx.workflows.signal_recorded(run_key, request.request_id):
        return True
    if run.signal_count >= ctx.limits.max_signals_per_run:
        ctx.out.reject(cmd, RejectionType.INVALID_ARGUMENT, SIGNAL_LIMIT_MESSAGE)
        return False
    RunWriter(ctx, run_key, run).deliver([request.event(ctx, run_key, run)])
    ctx.workflows.put(run_key, run)
    return True


def reply_signaled(ctx: ProcessingContext, run_key: int, run: WorkflowRun, name: str) -> None:
    """The sender's answer: the signal is in the run's history (or buffered for it)."""
    ctx.out.reply(WF, WorkflowIntent.SIGNALED, run_key, {"workflow_id": run.workflow_id, "run_id": run.run_id,
                                                         "signal_name": name})
