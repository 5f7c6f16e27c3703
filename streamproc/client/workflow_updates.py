"""Updates from the caller's side, as Temporal's client: start one and wait for a stage,
then for its result.

An UPDATE names its update id; the engine answers at the stage asked for: ACCEPTED once
the workflow's validator accepted it, COMPLETED with the handler's result (or failure).
Sending the same update id again is safe (it is applied once; the answer is the
recorded outcome), so a wait longer than one request's timeout, or one across a broker
outage, simply asks again.
"""

from __future__ import annotations

import time
import uuid
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from streamproc.activity.failures import exception_from_failure
from streamproc.client.errors import RequestOutcomeUnknownError, WorkflowUpdateFailedError
from streamproc.client.sync_bridge import sync_proxied
from streamproc.protocol.records import Record, RecordType, WorkflowIntent

if TYPE_CHECKING:
    from streamproc.client.workflow_handle import WorkflowHandle

__all__ = ["WorkflowUpdateStage", "WorkflowUpdateHandle"]

#: One request's wait for the COMPLETED stage, before asking again.
_POLL_S = 30.0


class WorkflowUpdateStage(IntEnum):
    """Temporal's stages an update's caller may wait for (ADMITTED is not offered)."""

    UNSPECIFIED = 0
    ADMITTED = 1
    ACCEPTED = 2
    COMPLETED = 3


@sync_proxied
class WorkflowUpdateHandle:
    """An update sent to a workflow: `await result()` waits for its outcome."""

    def __init__(self, handle: WorkflowHandle, update_id: str, name: str, encoded_args: str,
                 outcome: Record | None = None, result_type: type | None = None) -> None:
        self.workflow_handle = handle
        self.id = update_id
        self.name = name
        self.result_type = result_type
        self._args = encoded_args
        self._outcome = outcome

    async def result(self, timeout: float | None = None) -> Any:
        """The handler's result. Raises `WorkflowUpdateFailedError` (its cause says why)
        and TimeoutError when `timeout` seconds pass without an outcome."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._outcome is None:
            left = _POLL_S if deadline is None else min(_POLL_S, deadline - time.monotonic())
            if left <= 0:
                raise TimeoutError(f"update {self.name!r} ({self.id}) of workflow {self.workflow_handle.id!r} "
                                   f"has no outcome within {timeout} s")
            try:
                record = await send(self.workflow_handle, self.id, self.name, self._args, WorkflowUpdateStage.COMPLETED, left)
            except RequestOutcomeUnknownError:
                continue  # no answer yet (the handler is still running, or the broker was away): ask again
            if record.intent == WorkflowIntent.UPDATE_COMPLETED or record.intent == WorkflowIntent.UPDATE_REJECTED:
                self._outcome = record
        return outcome_of(self._outcome, self.workflow_handle, self.id, self.name, self.result_type)

    def __repr__(self) -> str:
        return f"WorkflowUpdateHandle(id={self.id!r}, name={self.name!r}, workflow_id={self.workflow_handle.id!r})"


async def send(handle: WorkflowHandle, update_id: str, name: str, encoded_args: str, stage: WorkflowUpdateStage,
         rpc_timeout: float) -> Record:
    """One UPDATE request; the engine's answer (a rejection of the request raises)."""
    if stage not in (WorkflowUpdateStage.ACCEPTED, WorkflowUpdateStage.COMPLETED):
        raise ValueError(f"wait_for_stage must be ACCEPTED or COMPLETED, got {stage!r}")
    client = handle.requests.client
    reply = await handle.requests.request(
        WorkflowIntent.UPDATE, {"workflow_id": handle.id, "run_id": handle.run_id or "", "update_id": update_id,
                                "update_name": name, "input": encoded_args, "update_stage": stage.name,
                                "identity": client.identity},
        rpc_timeout, request_id=f"{update_id}/{uuid.uuid4().hex[:8]}",
        accept=lambda r: r.intent in (WorkflowIntent.UPDATE_ACCEPTED, WorkflowIntent.UPDATE_COMPLETED,
                                      WorkflowIntent.UPDATE_REJECTED))
    if reply.record.record_type is RecordType.COMMAND_REJECTION:
        raise handle.rejection(reply.record)
    return reply.record


def outcome_of(record: Record, handle: WorkflowHandle, update_id: str, name: str,
               result_type: type | None = None) -> Any:
    converter = handle.requests.client.data_converter
    failure = record.value.get("failure")
    if failure is not None:
        raise WorkflowUpdateFailedError(cause=exception_from_failure(failure, converter=converter),
                                        update_id=update_id, update_name=name)
    return converter.decode(record.value.get("result"), result_type)

