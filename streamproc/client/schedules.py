"""Create, describe, change and list schedules, as Temporal's client does::

    handle = await client.create_schedule("nightly-report", Schedule(
        action=ScheduleActionStartWorkflow(Report.run, "eu", id="report", task_queue="reports"),
        spec=ScheduleSpec(cron_expressions=["0 2 * * *"])))
    await handle.pause(note="maintenance"); await handle.trigger()
    print((await handle.describe()).info.next_action_times)

Each call is a SCHEDULE command to the partition of the schedule id, answered on this
client's replies partition (sent again across a broker outage when it is safe to:
`client/requests.py`). `list_schedules` asks every partition.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import Future
from datetime import datetime
from typing import Any

import orjson

from streamproc.client.errors import rejection_error
from streamproc.client.lazy_channels import OpenedOnFirstUse
from streamproc.client.requests import RequestChannel
from streamproc.client.sync_bridge import sync_proxied
from streamproc.client.workflows import check_attribute_sizes
from streamproc.client.schedule_types import (
    Schedule,
    ScheduleBackfill,
    ScheduleOverlapPolicy,
    ScheduleSpec,
    backfill_wire,
    from_epoch_ms,
    schedule_from_wire,
    schedule_wire,
    spec_from_wire,
)
from streamproc.exceptions import ScheduleAlreadyRunningError
from streamproc.kafka.replies import Reply
from streamproc.protocol.partitioning import partition_for
from streamproc.protocol.records import Record, RecordType, RejectionType, ScheduleIntent, ValueType
from streamproc.semantics.schedule_spec import compile_spec

__all__ = ["ScheduleOperations", "ScheduleHandle", "ScheduleDescription", "ScheduleInfo",
           "ScheduleActionResult", "ScheduleListDescription", "ScheduleUpdate", "ScheduleUpdateInput"]

#: Read-only or applied once (a CREATE sent again with its request id is answered as before).
_IDEMPOTENT = frozenset({ScheduleIntent.CREATE, ScheduleIntent.DESCRIBE, ScheduleIntent.LIST})


@dataclasses.dataclass(frozen=True)
class ScheduleActionResult:
    """One recent action: when it was due (jittered), when it started, and its workflow."""

    scheduled_at: datetime
    started_at: datetime
    workflow_id: str
    first_execution_run_id: str
    status: str


@dataclasses.dataclass(frozen=True)
class ScheduleInfo:
    num_actions: int
    num_actions_missed_catchup_window: int
    num_actions_skipped_overlap: int
    buffer_dropped: int
    buffer_size: int
    #: Workflows started and still running: (workflow id, first run id).
    running_actions: Sequence[tuple[str, str]]
    recent_actions: Sequence[ScheduleActionResult]
    next_action_times: Sequence[datetime]
    created_at: datetime
    last_updated_at: datetime | None


@dataclasses.dataclass(frozen=True)
class ScheduleDescription:
    id: str
    schedule: Schedule
    info: ScheduleInfo
    memo: dict[str, Any] | None
    search_attributes: dict[str, Any] | None
    #: What UPDATE checks, so an update built from this description fails if another came between.
    conflict_token: int


@dataclasses.dataclass(frozen=True)
class ScheduleListDescription:
    id: str
    workflow_type: str
    paused: bool
    note: str
    spec: ScheduleSpec
    recent_actions: Sequence[ScheduleActionResult]
    next_action_times: Sequence[datetime]
    memo: dict[str, Any] | None


@dataclasses.dataclass(frozen=True)
class ScheduleUpdateInput:
    description: ScheduleDescription


@dataclasses.dataclass(frozen=True)
class ScheduleUpdate:
    schedule: Schedule
    search_attributes: dict[str, Any] | None = None


def _recent(entries: list[dict[str, Any]]) -> list[ScheduleActionResult]:
    return [ScheduleActionResult(from_epoch_ms(a["actual_ms"]), from_epoch_ms(a["start_ms"]), a["workflow_id"],
                                 a.get("run_id", ""), a.get("status", "RUNNING")) for a in entries]


def _checked_wire(schedule: Schedule, converter: Any) -> dict[str, Any]:
    """The schedule's wire form, its spec compiled here first (the engine's own pure
    compiler): a bad spec raises `InvalidArgument` with Temporal's message before sending."""
    wire = schedule_wire(schedule, converter.encode_args)
    compile_spec(wire["spec"])
    return wire


class _Calls:
    """The request/answer plumbing of one client's schedule calls."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.channel = RequestChannel(client)

    async def call(self, intent: str, value: dict[str, Any], rpc_timeout: float, *, accept: str,
             partition: int | None = None, request_id: str | None = None) -> Record:
        """Send `intent` and return the reply whose intent is `accept`; raises the rejection."""
        request_id = request_id or uuid.uuid4().hex

        def on_reply(reply: Reply, answer: Future) -> bool:
            record = reply.record
            if record.record_type is RecordType.COMMAND_REJECTION or record.intent == accept:
                if not answer.done():
                    answer.set_result(record)
                return True
            return False

        record = await self.channel.call(
            lambda reply_partition: Record.command(ValueType.SCHEDULE, intent, value, request_id=request_id,
                                                   reply_partition=reply_partition),
            lambda partitions: partition if partition is not None else partition_for(value["schedule_id"], partitions),
            on_reply, rpc_timeout, request_id=request_id, intent=intent, idempotent=intent in _IDEMPOTENT)
        if record.record_type is RecordType.COMMAND_REJECTION:
            if record.rejection_type == RejectionType.ALREADY_EXISTS:
                raise ScheduleAlreadyRunningError(record.rejection_reason or "")
            raise rejection_error(record)
        return record

    def close(self) -> None:
        self.channel.close()


@sync_proxied
class ScheduleHandle:
    """A schedule by id: describe it, pause, unpause, trigger, backfill, update, delete
    (coroutines, as Temporal's)."""

    def __init__(self, calls: _Calls, id: str) -> None:
        self._calls = calls
        self.id = id

    async def _send(self, intent: str, rpc_timeout: float, accept: str, **value: Any) -> Record:
        return await self._calls.call(intent, {"schedule_id": self.id, **value}, rpc_timeout, accept=accept)

    async def describe_json(self, rpc_timeout: float = 30) -> dict[str, Any]:
        """The description as the engine wrote it (docs/schedules.md)."""
        record = await self._send(ScheduleIntent.DESCRIBE, rpc_timeout, ScheduleIntent.DESCRIBED)
        return orjson.loads(record.value["attributes"])

    async def describe(self, rpc_timeout: float = 30) -> ScheduleDescription:
        d = await self.describe_json(rpc_timeout)
        info = d["info"]
        converter = self._calls.client.data_converter
        return ScheduleDescription(
            id=self.id, schedule=schedule_from_wire(d["schedule"], lambda text: list(converter.decode_args(text))),
            info=ScheduleInfo(
                num_actions=info["action_count"], num_actions_missed_catchup_window=info["missed_catchup_window"],
                num_actions_skipped_overlap=info["overlap_skipped"], buffer_dropped=info["buffer_dropped"],
                buffer_size=info["buffer_size"],
                running_actions=[(r["workflow_id"], r["run_id"]) for r in info["running_workflows"]],
                recent_actions=_recent(info["recent_actions"]),
                next_action_times=[from_epoch_ms(t) for t in info["future_action_times_ms"]],
                created_at=from_epoch_ms(info["create_time_ms"]),
                last_updated_at=(from_epoch_ms(info["update_time_ms"])
                                 if info["update_time_ms"] != info["create_time_ms"] else None)),
            memo=d.get("memo"), search_attributes=d.get("search_attributes"), conflict_token=d["conflict_token"])

    async def _patch(self, patch: dict[str, Any], rpc_timeout: float) -> None:
        await self._send(ScheduleIntent.PATCH, rpc_timeout, ScheduleIntent.PATCHED, patch=orjson.dumps(patch).decode())

    async def pause(self, *, note: str | None = None, rpc_timeout: float = 30) -> None:
        await self._patch({"pause": note or "Paused via Python SDK"}, rpc_timeout)

    async def unpause(self, *, note: str | None = None, rpc_timeout: float = 30) -> None:
        await self._patch({"unpause": note or "Unpaused via Python SDK"}, rpc_timeout)

    async def trigger(self, *, overlap: ScheduleOverlapPolicy | None = None, rpc_timeout: float = 30) -> None:
        """Take the action now (even when paused), under `overlap` or the schedule's policy."""
        await self._patch({"trigger_immediately": {
            "overlap_policy": "" if overlap is None else ScheduleOverlapPolicy(overlap).name}}, rpc_timeout)

    async def backfill(self, *backfills: ScheduleBackfill, rpc_timeout: float = 30) -> None:
        """Take the spec's actions in each range now (as manual actions)."""
        if not backfills:
            raise ValueError("give at least one ScheduleBackfill")
        await self._patch({"backfill_request": [backfill_wire(b) for b in backfills]}, rpc_timeout)

    async def update(self, updater: Callable[[ScheduleUpdateInput], Any], *, rpc_timeout: float = 30) -> None:
        """Describe, let `updater` build the new schedule (None: leave it; it may be a
        coroutine function), and send it with the description's conflict token (refused if
        another update came in between)."""
        description = await self.describe(rpc_timeout)
        change = updater(ScheduleUpdateInput(description))
        if inspect.isawaitable(change):
            change = await change
        if change is None:
            return
        converter = self._calls.client.data_converter
        attributes = {} if change.search_attributes is None else {"search_attributes": change.search_attributes}
        await self._send(ScheduleIntent.UPDATE, rpc_timeout, ScheduleIntent.UPDATED,
                   schedule=orjson.dumps(_checked_wire(change.schedule, converter)).decode(),
                   conflict_token=description.conflict_token, identity=self._calls.client.identity,
                   attributes=orjson.dumps(attributes).decode() if attributes else None)

    async def delete(self, rpc_timeout: float = 30) -> None:
        await self._send(ScheduleIntent.DELETE, rpc_timeout, ScheduleIntent.DELETED, identity=self._calls.client.identity)

    def __repr__(self) -> str:
        return f"ScheduleHandle({self.id!r})"


class ScheduleOperations:
    """The schedule methods of `Client`."""

    _schedule_calls: _Calls | None = None
    #: Schedule requests and their replies, shared by the handles.
    schedule_calls = OpenedOnFirstUse(_Calls)

    async def create_schedule(self, id: str, schedule: Schedule, *, trigger_immediately: bool = False,
                        backfill: Sequence[ScheduleBackfill] = (), memo: dict[str, Any] | None = None,
                        search_attributes: dict[str, Any] | None = None, rpc_timeout: float = 30) -> ScheduleHandle:
        """Create schedule `id`; raises `ScheduleAlreadyRunningError` if the id is in use,
        `InvalidArgument` for a bad spec or action (Temporal's messages)."""
        patch: dict[str, Any] = {}
        if trigger_immediately:
            patch["trigger_immediately"] = {}
        if backfill:
            patch["backfill_request"] = [backfill_wire(b) for b in backfill]
        definition = _checked_wire(schedule, self.data_converter)
        attributes = {k: v for k, v in (("memo", memo), ("search_attributes", search_attributes)) if v is not None}
        check_attribute_sizes(attributes)  # refused here, as the engine would, before a huge send
        await self.schedule_calls.call(ScheduleIntent.CREATE, {
            "schedule_id": id, "schedule": orjson.dumps(definition).decode(),
            "patch": orjson.dumps(patch).decode() if patch else None, "identity": self.identity,
            "attributes": orjson.dumps(attributes).decode() if attributes else None,
        }, rpc_timeout, accept=ScheduleIntent.CREATED)
        return ScheduleHandle(self.schedule_calls, id)

    def get_schedule_handle(self, id: str) -> ScheduleHandle:
        return ScheduleHandle(self.schedule_calls, id)

    async def list_schedules(self, *, rpc_timeout: float = 30) -> AsyncIterator[ScheduleListDescription]:
        """Every schedule, partition by partition, in id order within each, as Temporal's:
        ``async for s in await client.list_schedules():``."""
        return self._schedules(rpc_timeout)

    async def _schedules(self, rpc_timeout: float) -> AsyncIterator[ScheduleListDescription]:
        for partition in range(self.known_partitions or await asyncio.to_thread(self.partition_count, rpc_timeout)):
            after = ""
            while True:
                record = await self.schedule_calls.call(ScheduleIntent.LIST, {"schedule_id": after}, rpc_timeout,
                                                  accept=ScheduleIntent.LISTED, partition=partition)
                page = orjson.loads(record.value["attributes"])
                for s in page["schedules"]:
                    info = s["info"]
                    yield ScheduleListDescription(
                        id=s["schedule_id"], workflow_type=info["workflow_type"], paused=info["paused"],
                        note=info["note"], spec=spec_from_wire(info["spec"]),
                        recent_actions=_recent(info["recent_actions"]),
                        next_action_times=[from_epoch_ms(t) for t in info["future_action_times_ms"]],
                        memo=s.get("memo"))
                if not page["more"] or not page["schedules"]:
                    break
                after = page["schedules"][-1]["schedule_id"]

    def close_schedule_calls(self) -> None:
        ScheduleOperations.schedule_calls.close_on(self)
