"""Job commands that wait for the engine's answer: the event it wrote, or its rejection.

`Client.create_job` and friends only put a command on the log (a worker sends thousands a
second and learns the outcome from the next task); a person at a shell wants to know what
became of theirs: the key of the job created, or why a COMPLETE was refused. These send
the same commands with a request id and a reply partition (`client/requests.py`).
"""

from __future__ import annotations

import uuid
from concurrent.futures import Future
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import orjson

from streamproc.client.errors import rejection_error
from streamproc.client.requests import RequestChannel
from streamproc.client.sync_bridge import FollowsClientFace, sync_proxied
from streamproc.closing import ClosesOnExit
from streamproc.protocol.partitioning import partition_for, partition_of_key
from streamproc.protocol.records import JobIntent, Record, RecordType, ValueType

if TYPE_CHECKING:
    from streamproc.kafka.replies import Reply


@sync_proxied
class JobRequests(FollowsClientFace, ClosesOnExit):
    """One replies partition for a client's job commands; close it when done. Its calls
    are coroutines; made from a `SyncClient` (the CLI's), they block."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._channel = RequestChannel(client)

    async def create(self, type: str, payload: Any = None, *, retries: int = 3, timeout: timedelta = timedelta(minutes=5),
               rpc_timeout: float = 30) -> Record:
        """Create a job on task queue `type`; its CREATED event (`.key` is the job key)."""
        value = {"type": type, "payload": orjson.dumps(payload).decode(), "retries": retries,
                 "timeout_ms": int(timeout.total_seconds() * 1000)}
        request_id = uuid.uuid4().hex
        return await self._call(JobIntent.CREATE, value, request_id, lambda n: partition_for(request_id, n), rpc_timeout)

    async def command(self, intent: str, key: int, rpc_timeout: float = 30, **value: Any) -> Record:
        """Send `intent` (COMPLETE, FAIL, UPDATE_RETRIES, CANCEL ...) for job `key`; the event
        it wrote (COMPLETED, FAILED ...). Raises the rejection (`CommandRejectedError`)."""
        return await self._call(intent, value, uuid.uuid4().hex, lambda n: partition_of_key(key), rpc_timeout, key=key)

    async def _call(self, intent: str, value: dict[str, Any], request_id: str, partition, rpc_timeout: float,
              key: int = -1) -> Record:
        def on_reply(reply: Reply, answer: Future) -> bool:
            # The first answer is the command's own event (FAILED before INCIDENT CREATED).
            if not answer.done():
                answer.set_result(reply.record)
            return True

        record = await self._channel.call(
            lambda reply_partition: Record.command(ValueType.JOB, intent, value, key=key, request_id=request_id,
                                                   reply_partition=reply_partition),
            partition, on_reply, rpc_timeout, request_id=request_id, intent=intent, idempotent=False)
        if record.record_type is RecordType.COMMAND_REJECTION:
            raise rejection_error(record)
        return record

    def close(self) -> None:
        self._channel.close()
