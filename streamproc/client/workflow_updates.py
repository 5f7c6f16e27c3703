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
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from streamproc.activity.failures import exception_from_failure
from streamproc.call_arguments import NO_ARG, call_arguments
from streamproc.client.errors import RequestOutcomeUnknownError, WorkflowUpdateFailedError
from streamproc.client.sync_bridge import sync_proxied
from streamproc.exceptions import WorkflowUpdateNotFoundError
from streamproc.protocol.records import Record, RecordType, RejectionType, WorkflowIntent
from streamproc.workflow.definition import result_type_of, update_name_of

if TYPE_CHECKING:
    from streamproc.client.workflow_handle import WorkflowHandle

__all__ = ["WorkflowUpdateStage", "WorkflowUpdateHandle", "WorkflowUpdates"]

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


class WorkflowUpdates:
    """The update methods of `WorkflowHandle` (`id`, `run_id`, `requests` are the handle's)."""

    id: str
    run_id: str | None

    async def start_update(self, update: str | Callable[..., Any], arg: Any = NO_ARG, *,
                           args: Sequence[Any] = (), id: str | None = None,
                           wait_for_stage: WorkflowUpdateStage = WorkflowUpdateStage.ACCEPTED,
                           rpc_timeout: float = 30, result_type: type | None = None) -> WorkflowUpdateHandle:
        """Send an update (a name, or the ``@workflow.update`` method) and wait until it
        reaches `wait_for_stage` (ACCEPTED: its validator accepted it; COMPLETED: its
        handler returned). Raises `WorkflowUpdateFailedError` if it was rejected. `id` (a
        new uuid by default) makes sending it again safe: it is applied once. A handler
        that runs longer than `rpc_timeout` (waiting for COMPLETED) gives a handle whose
        `result()` waits on, as Temporal's per-call `rpc_timeout`."""
        name = update_name_of(update)
        update_id = id or str(uuid.uuid4())
        stage = WorkflowUpdateStage(wait_for_stage)
        result_type = result_type if result_type is not None else result_type_of(update)
        encoded = self.requests.client.data_converter.encode_args(call_arguments(arg, args))
        try:
            record = await send(self, update_id, name, encoded, stage, rpc_timeout)
        except RequestOutcomeUnknownError as exc:
            if stage is not WorkflowUpdateStage.COMPLETED or not exc.delivered:
                raise
            # It is on the log and its handler still runs: the handle's POLL_UPDATE goes to
            # the same partition after it, so it finds the update and waits for its outcome.
            return WorkflowUpdateHandle(self, update_id, name, workflow_run_id=self.run_id, result_type=result_type)
        finished = record.intent in _OUTCOMES
        if record.intent == WorkflowIntent.UPDATE_REJECTED:
            outcome_of(record, self, update_id, name)  # raises
        return WorkflowUpdateHandle(self, update_id, name, workflow_run_id=record.value["run_id"],
                                    outcome=record if finished else None, result_type=result_type)

    def get_update_handle(self, id: str, *, workflow_run_id: str | None = None,
                          result_type: type | None = None) -> WorkflowUpdateHandle:
        """A handle on update `id` of this workflow, sent by anyone (another client,
        another process): ``await result()`` waits for its outcome. `workflow_run_id`:
        the run it was sent to (default: this handle's run, else the current one)."""
        return WorkflowUpdateHandle(self, id, workflow_run_id=workflow_run_id or self.run_id, result_type=result_type)

    def get_update_handle_for(self, update: Callable[..., Any], id: str, *,
                              workflow_run_id: str | None = None) -> WorkflowUpdateHandle:
        """`get_update_handle` typed by the ``@workflow.update`` method, as Temporal's."""
        return WorkflowUpdateHandle(self, id, update_name_of(update), workflow_run_id=workflow_run_id or self.run_id,
                                    result_type=result_type_of(update))

    async def execute_update(self, update: str | Callable[..., Any], arg: Any = NO_ARG, *,
                             args: Sequence[Any] = (), id: str | None = None, rpc_timeout: float = 30,
                             timeout: float | None = None, result_type: type | None = None) -> Any:
        """Send an update and wait for its result (`timeout` seconds at most; None: as long
        as it takes). Raises `WorkflowUpdateFailedError` when it was rejected or failed."""
        handle = await self.start_update(update, arg, args=args, id=id, rpc_timeout=rpc_timeout,
                                         wait_for_stage=WorkflowUpdateStage.COMPLETED, result_type=result_type)
        return await handle.result(timeout, rpc_timeout=rpc_timeout)


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

