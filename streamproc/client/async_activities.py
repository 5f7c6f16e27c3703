"""Answer for an activity from outside its worker: Temporal's asynchronous activity completion::

    @activity.defn
    async def request_approval(order_id: str) -> str:
        await approvals.send(order_id, activity.info().task_token)   # whoever approves gets the token
        activity.raise_complete_async()                               # the worker answers nothing

    # later, wherever the approval arrives (another process, a web handler ...):
    handle = client.get_async_activity_handle(task_token=token)
    await handle.heartbeat("waiting for a human")   # keeps a heartbeat timeout from firing
    await handle.complete("approved")                # or fail(error), report_cancellation()

A handle names the activity by the task token of one attempt, or by workflow id, run id
("" or None: the current run) and activity id (then whatever attempt is current). Each
call sends the command a worker would send (COMPLETE, FAIL, HEARTBEAT, REPORT_CANCELED) to
the activity's partition and waits for the engine's answer: a refusal raises
`ActivityNotFoundError` (the attempt timed out or was retried, the activity or its
workflow closed) or `InvalidArgument`; a heartbeat that learns of a cancellation request
raises `AsyncActivityCancelledError`. Over a `SyncClient` the same calls block.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from streamproc.activity.failures import attempt_failure
from streamproc.client.errors import rejection_error
from streamproc.client.lazy_channels import OpenedOnFirstUse
from streamproc.client.requests import RequestChannel
from streamproc.client.sync_bridge import sync_proxied
from streamproc.exceptions import ActivityNotFoundError, AsyncActivityCancelledError
from streamproc.protocol.partitioning import partition_for, partition_of_key
from streamproc.protocol.records import ActivityIntent as A
from streamproc.protocol.records import Record, RecordType, RejectionType, ValueType
from streamproc.protocol.task_tokens import TaskToken

__all__ = ["AsyncActivityHandle", "AsyncActivityIDReference", "AsyncActivityOperations"]

_DEFAULT_RPC_TIMEOUT_S = 30.0


@dataclasses.dataclass(frozen=True)
class AsyncActivityIDReference:
    """An activity named by its workflow (Temporal's name): `run_id` None is the current run."""

    workflow_id: str
    run_id: str | None
    activity_id: str


class AsyncActivityOperations:
    """`Client.get_async_activity_handle`, and the requests channel its handles share."""

    _async_activity_channel: RequestChannel | None = None
    #: Requests about async activities and their replies, shared by the handles.
    async_activity_channel = OpenedOnFirstUse(RequestChannel)

    def get_async_activity_handle(self, *, workflow_id: str | None = None, run_id: str | None = None,
                                  activity_id: str | None = None,
                                  task_token: bytes | None = None) -> AsyncActivityHandle:
        """A handle on the attempt `task_token` names (``activity.info().task_token``), or on
        the current attempt of activity `activity_id` of workflow `workflow_id` (run `run_id`,
        or its current run). Raises ValueError for a mix of both or a token that is not one."""
        if task_token is not None:
            if workflow_id is not None or run_id is not None or activity_id is not None:
                raise ValueError("give either task_token, or workflow_id, run_id and activity_id, not both")
            token = TaskToken.decode(task_token)
            if token.namespace != self.topics.namespace:
                raise ValueError(f"the task token is of namespace {token.namespace!r}, "
                                 f"this client's is {self.topics.namespace!r}")
            return AsyncActivityHandle(self, token)
        if not workflow_id or not activity_id:
            raise ValueError("get_async_activity_handle needs task_token, or workflow_id and activity_id "
                             f"(got workflow_id={workflow_id!r}, activity_id={activity_id!r})")
        return AsyncActivityHandle(self, AsyncActivityIDReference(workflow_id, run_id, activity_id))

    def close_async_activity_requests(self) -> None:
        AsyncActivityOperations.async_activity_channel.close_on(self)


@sync_proxied
class AsyncActivityHandle:
    """An activity completing asynchronously: heartbeat for it, then complete, fail or
    report its cancellation (see the module's docstring)."""

    def __init__(self, client: Any, id_or_token: TaskToken | AsyncActivityIDReference) -> None:
        self._client = client
        self._id_or_token = id_or_token

    @property
    def task_token(self) -> bytes | None:
        return self._id_or_token.encode() if isinstance(self._id_or_token, TaskToken) else None

    @property
    def id_reference(self) -> AsyncActivityIDReference | None:
        return self._id_or_token if isinstance(self._id_or_token, AsyncActivityIDReference) else None

    async def heartbeat(self, *details: Any, rpc_timeout: float | timedelta | None = None,
                        rpc_metadata: Mapping[str, str] | None = None) -> None:
        """Record a heartbeat with `details` (what a retry resumes from): the attempt's
        heartbeat timeout starts again. Raises `AsyncActivityCancelledError` once
        cancellation was requested, `ActivityNotFoundError` once the attempt is over."""
        converter = self._client.data_converter
        reply = await self._send(A.HEARTBEAT, {"details": converter.encode_details(list(details))},
                                 rpc_timeout, rpc_metadata, idempotent=True)
        if reply.value.get("cancel_requested"):
            raise AsyncActivityCancelledError()

    async def complete(self, result: Any = None, *, rpc_timeout: float | timedelta | None = None,
                       rpc_metadata: Mapping[str, str] | None = None) -> None:
        """Complete the activity with `result`."""
        await self._send(A.COMPLETE, {"result": self._client.data_converter.encode(result)}, rpc_timeout, rpc_metadata)

    async def fail(self, error: BaseException, *, last_heartbeat_details: Any = (),
                   rpc_timeout: float | timedelta | None = None,
                   rpc_metadata: Mapping[str, str] | None = None) -> None:
        """Fail the attempt with `error` (an `ApplicationError` says whether to retry); it is
        retried by the activity's retry policy, from `last_heartbeat_details` if given."""
        converter = self._client.data_converter
        value = {"failure": attempt_failure(error, converter),
                 "details": converter.encode_details(list(last_heartbeat_details)) if last_heartbeat_details else None}
        await self._send(A.FAIL, value, rpc_timeout, rpc_metadata)

    async def report_cancellation(self, *details: Any, rpc_timeout: float | timedelta | None = None,
                                  rpc_metadata: Mapping[str, str] | None = None) -> None:
        """Tell the engine the activity stopped after its cancellation was requested."""
        converter = self._client.data_converter
        await self._send(A.REPORT_CANCELED, {"details": converter.encode_details(list(details)) if details else None},
                         rpc_timeout, rpc_metadata)

    async def _send(self, intent: str, value: dict[str, Any], rpc_timeout: float | timedelta | None,
                    rpc_metadata: Mapping[str, str] | None, idempotent: bool = False) -> Record:
        """Send the command for this activity; the engine's answer, or raise its refusal."""
        if rpc_metadata:  # Temporal's default is an empty mapping: that one means nothing here either
            raise NotImplementedError("rpc_metadata is not implemented by streamproc's AsyncActivityHandle "
                                      "(gRPC metadata; see docs/temporal-compatibility.md)")
        target = self._id_or_token
        if isinstance(target, TaskToken):
            key, value = target.activity_key, {**value, "attempt": target.attempt, "activity_id": target.activity_id}
            partition_of = lambda _n: partition_of_key(key)  # noqa: E731 - the key names its partition
        else:
            key = -1
            value = {**value, "workflow_id": target.workflow_id, "run_id": target.run_id or "",
                     "activity_id": target.activity_id}
            partition_of = lambda n: partition_for(target.workflow_id, n)  # noqa: E731 - the run's partition
        value["identity"] = self._client.identity
        value["reply_when_accepted"] = True
        request_id = uuid.uuid4().hex

        def on_reply(reply, answer) -> bool:
            if not answer.done():
                answer.set_result(reply)
            return True

        reply = await self._client.async_activity_channel.call(
            lambda reply_partition: Record.command(ValueType.ACTIVITY_TASK, intent, value, key=key,
                                                   request_id=request_id, reply_partition=reply_partition),
            partition_of, on_reply, _DEFAULT_RPC_TIMEOUT_S if rpc_timeout is None else rpc_timeout,
            request_id=request_id, intent=intent, idempotent=idempotent)
        record = reply.record
        if record.record_type is RecordType.COMMAND_REJECTION:
            raise _refusal(record)
        return record

    def __repr__(self) -> str:
        return f"AsyncActivityHandle({self._id_or_token!r})"


def _refusal(record: Record) -> Exception:
    """The exception for a refused answer: an attempt that is over is Temporal's NOT_FOUND."""
    if record.rejection_type in (RejectionType.NOT_FOUND, RejectionType.INVALID_STATE):
        return ActivityNotFoundError(f"invalid activityID or activity already timed out or invoking workflow "
                                     f"is completed: {record.rejection_reason}")
    return rejection_error(record)
