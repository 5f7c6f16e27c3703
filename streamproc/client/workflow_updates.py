"""Updates from the caller's side, as Temporal's client: start one and wait for a stage,
then for its result; or take a handle on an update anyone sent, by its id.

An UPDATE names its update id; the engine answers at the stage asked for: ACCEPTED once
the workflow's validator accepted it, COMPLETED with the handler's result (or failure).
Sending the same update id again is safe (it is applied once; the answer is the
recorded outcome).

`WorkflowUpdateHandle.result()` asks with POLL_UPDATE, which names only the update id
(Temporal's PollWorkflowExecutionUpdate): the engine answers when the outcome is recorded,
or at once if it is, so a handle from `get_update_handle(id)` in another process waits
the same way as the one `start_update` returned. A wait longer than one request's
timeout, or one across a broker outage, asks again under the same request id, so the
engine keeps one waiter for it. An update id the run does not know (never sent, or
rejected) raises `WorkflowUpdateNotFoundError`, Temporal's NOT_FOUND.
"""

from __future__ import annotations

import time
import uuid
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from streamproc.activity.failures import exception_from_failure
from streamproc.client.errors import RequestOutcomeUnknownError, WorkflowUpdateFailedError
from streamproc.client.sync_bridge import sync_proxied
from streamproc.exceptions import WorkflowUpdateNotFoundError
from streamproc.protocol.records import Record, RecordType, RejectionType, WorkflowIntent

if TYPE_CHECKING:
    from streamproc.client.workflow_handle import WorkflowHandle

__all__ = ["WorkflowUpdateStage", "WorkflowUpdateHandle"]

#: One request's wait for the COMPLETED stage, before asking again.
_POLL_S = 30.0
#: How the engine words an update id it does not know (Temporal's words).
_NOT_FOUND_PREFIX = 'update "'
_OUTCOMES = (WorkflowIntent.UPDATE_COMPLETED, WorkflowIntent.UPDATE_REJECTED)


class WorkflowUpdateStage(IntEnum):
    """Temporal's stages an update's caller may wait for (ADMITTED is not offered)."""

    UNSPECIFIED = 0
    ADMITTED = 1
    ACCEPTED = 2
    COMPLETED = 3


@sync_proxied
class WorkflowUpdateHandle:
    """An update of a workflow: `await result()` waits for its outcome. From
    `start_update`, or `get_update_handle(id)` for one sent by anyone."""

    def __init__(self, handle: WorkflowHandle, update_id: str, name: str = "", *,
                 workflow_run_id: str | None = None, outcome: Record | None = None,
                 result_type: type | None = None) -> None:
        self.workflow_handle = handle
        self.id = update_id
        #: The update's name, when known (a handle by id learns it with the outcome).
        self.name = name
        self.result_type = result_type
        self._run_id = workflow_run_id
        self._outcome = outcome

    @property
    def workflow_id(self) -> str:
        return self.workflow_handle.id

    @property
    def workflow_run_id(self) -> str | None:
        """The run the update was sent to, if known (None: the workflow's current run)."""
        return self._run_id

    async def result(self, timeout: float | None = None, *, rpc_timeout: float | None = None) -> Any:
        """The handler's result. Raises `WorkflowUpdateFailedError` (its cause says why),
        `WorkflowUpdateNotFoundError` for an update id the run does not know, and
        TimeoutError when `timeout` seconds pass without an outcome. `rpc_timeout`
        (Temporal's): how long one request waits before asking again."""
        deadline = None if timeout is None else time.monotonic() + timeout
        per_request = _POLL_S if rpc_timeout is None else _seconds(rpc_timeout)
        request_id = f"{self.id}/poll/{uuid.uuid4().hex[:8]}"  # one waiter in the engine, however often we ask
        while self._outcome is None:
            left = per_request if deadline is None else min(per_request, deadline - time.monotonic())
            if left <= 0:
                raise TimeoutError(f"update {self.name or self.id!r} ({self.id}) of workflow "
                                   f"{self.workflow_handle.id!r} has no outcome within {timeout} s")
            try:
                self._outcome = await poll(self.workflow_handle, self.id, self._run_id, request_id, left)
            except RequestOutcomeUnknownError:
                continue  # no answer yet (the handler is still running, or the broker was away): ask again
        self.name = self.name or self._outcome.value.get("update_name") or ""
        return outcome_of(self._outcome, self.workflow_handle, self.id, self.name, self.result_type)

    def __repr__(self) -> str:
        return f"WorkflowUpdateHandle(id={self.id!r}, name={self.name!r}, workflow_id={self.workflow_handle.id!r})"


async def poll(handle: WorkflowHandle, update_id: str, run_id: str | None, request_id: str,
               rpc_timeout: float) -> Record:
    """One POLL_UPDATE: the update's outcome (UPDATE_COMPLETED or UPDATE_REJECTED)."""
    reply = await handle.requests.request(
        WorkflowIntent.POLL_UPDATE, {"workflow_id": handle.id, "run_id": run_id or "", "update_id": update_id,
                                     "update_stage": WorkflowUpdateStage.COMPLETED.name,
                                     "identity": handle.requests.client.identity},
        rpc_timeout, request_id=request_id, accept=lambda r: r.intent in _OUTCOMES)
    record = reply.record
    if record.record_type is RecordType.COMMAND_REJECTION:
        reason = record.rejection_reason or ""
        if record.rejection_type == RejectionType.NOT_FOUND and reason.startswith(_NOT_FOUND_PREFIX):
            raise WorkflowUpdateNotFoundError(reason)
        raise handle.rejection(record)
    return record


def _seconds(value: Any) -> float:
    return value.total_seconds() if hasattr(value, "total_seconds") else float(value)


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
        accept=lambda r: r.intent in (WorkflowIntent.UPDATE_ACCEPTED, *_OUTCOMES))
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

