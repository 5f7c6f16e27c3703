"""Schedule activities and wait for their results, without a workflow::

    activities = ActivityClient(await Client.connect())
    handle = await activities.schedule_activity(charge, "order-1", 5, task_queue="payments",
                                                start_to_close_timeout=timedelta(seconds=10))
    print(await handle.result(timeout=60))

Over a `SyncClient` (``with Client() as client, ActivityClient(client) as activities:``)
the same calls block, run on that client's event loop thread.

SCHEDULE is sent with a reply partition, so its answer (ActivityTaskScheduled with the
activity's key, or the rejection) comes back at once. The close event answers a
worker's command or a timer, not ours, so `result()` reads it from the events topic:
only the activity's partition, from about when it was scheduled.

Arguments are checked here with the engine's own rules and messages, so a bad timeout
raises the same `InvalidArgument` before sending that the engine would answer with.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from streamproc.activity import errors
from streamproc.activity.definition import ActivityDefinition
from streamproc.activity.failures import exception_from_failure
from streamproc.closing import ClosesOnExit
from streamproc.converter import DataConverter
from streamproc.client.client import Client
from streamproc.client.errors import rejection_error
from streamproc.client.requests import RequestChannel
from streamproc.client.sync_bridge import FollowsClientFace, sync_proxied
from streamproc.protocol.wire_values import ceil_ms as _ms
from streamproc.protocol.wire_values import retry_policy_record as _policy_record
from streamproc.kafka.batching import close_in_background, consume_available
from streamproc.kafka.client_log import ClientLog
from streamproc.kafka.config import consumer_config
from streamproc.protocol import codec
from streamproc.protocol.partitioning import partition_for, partition_of_key
from streamproc.protocol.records import ActivityIntent, Record, RecordType, RejectionType, ValueType
from streamproc.protocol.topics import check_task_queue
from streamproc.semantics import (
    ActivityTimeouts,
    InvalidArgument,
    RetryPolicy,
    RetryState,
    normalize_activity_retry_policy,
    normalize_activity_timeouts,
)
from streamproc.semantics.swf import SWF_NONE

__all__ = ["ActivityClient", "ActivityHandle", "Timeout"]

A = ActivityIntent
#: A timeout as the API takes it: a timedelta, or None / "NONE" for no timeout.
Timeout = timedelta | str | None
CLOSE_INTENTS = frozenset({A.COMPLETED, A.FAILED, A.TIMED_OUT, A.CANCELED})
#: How far before the SCHEDULE answer to start reading events: producers' clocks are
#: the same machine's here, but a margin costs little (records are filtered by key).
_LOOKBACK_MS = 60_000


@sync_proxied
class ActivityClient(FollowsClientFace, ClosesOnExit):
    """Activity commands for a `Client`; one replies partition shared by all its calls."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self._channel = RequestChannel(client)
        self._readers = ThreadPoolExecutor(max_workers=64, thread_name_prefix="activity-result")

    async def schedule_activity(self, activity: str | Callable[..., Any], *args: Any, task_queue: str,
                          activity_id: str | None = None,
                          schedule_to_close_timeout: Timeout = None,
                          schedule_to_start_timeout: Timeout = None,
                          start_to_close_timeout: Timeout = None,
                          heartbeat_timeout: Timeout = None,
                          retry_policy: RetryPolicy | None = None,
                          rpc_timeout: float = 30) -> ActivityHandle:
        """Schedule `activity` (a name or an `@activity.defn` function) with `args`.

        Raises `InvalidArgument` (checked here, or refused by the engine),
        `ActivityAlreadyStartedError` if an open activity has this id,
        `RequestOutcomeUnknownError` (with its `request_id`) if the engine did not answer
        within `rpc_timeout` seconds while the SCHEDULE may be on the log, and
        `RequestNotSentError` if it certainly is not.
        """
        activity_type = activity if isinstance(activity, str) else ActivityDefinition.of(activity).name
        activity_id = activity_id if activity_id is not None else str(uuid.uuid4())
        requested = ActivityTimeouts(*(_duration(v, name) for v, name in (
            (schedule_to_close_timeout, "schedule_to_close_timeout"),
            (schedule_to_start_timeout, "schedule_to_start_timeout"),
            (start_to_close_timeout, "start_to_close_timeout"),
            (heartbeat_timeout, "heartbeat_timeout"))))
        problem = (None if activity_id else "activity_id must be set") \
            or (None if activity_type else "activity_type must be set") \
            or check_task_queue(task_queue)
        if problem:
            raise InvalidArgument(problem)
        normalize_activity_timeouts(requested, activity_id=activity_id, activity_type=activity_type)
        normalize_activity_retry_policy(retry_policy)
        value = {
            "activity_id": activity_id, "activity_type": activity_type, "task_queue": task_queue,
            "input": self.client.data_converter.encode_args(args),
            "schedule_to_close_timeout_ms": _ms(requested.schedule_to_close),
            "schedule_to_start_timeout_ms": _ms(requested.schedule_to_start),
            "start_to_close_timeout_ms": _ms(requested.start_to_close),
            "heartbeat_timeout_ms": _ms(requested.heartbeat),
            "retry_policy": None if retry_policy is None else _policy_record(retry_policy),
        }
        reply = await self._request(A.SCHEDULE, -1, value, lambda n: partition_for(activity_id, n), rpc_timeout)
        record = reply.record
        if record.record_type is RecordType.COMMAND_REJECTION:
            raise _rejection(record, activity_id)
        return ActivityHandle(self, record.key, activity_id, activity_type, reply.log_time_ms)

    async def execute_activity(self, activity: str | Callable[..., Any], *args: Any,
                               result_timeout: float | None = None, **options: Any) -> Any:
        """Schedule and wait for the result (raises `ActivityError` if it did not complete)."""
        handle = await self.schedule_activity(activity, *args, **options)
        return await handle.result(result_timeout)

    def get_activity_handle(self, key: int, activity_id: str = "", activity_type: str = "") -> ActivityHandle:
        """A handle on an activity scheduled elsewhere; its result is searched for from the
        beginning of its events partition."""
        return ActivityHandle(self, key, activity_id, activity_type, None)

    # plumbing -----------------------------------------------------------------------------
    async def _request(self, intent: str, key: int, value: dict[str, Any], partition_of: Callable[[int], int],
                       rpc_timeout: float):
        """Send an activity command; its first reply. Not idempotent for the engine (a second
        SCHEDULE finds the id taken), so sent again only when a copy did not reach the log
        (`client/requests.py`)."""
        request_id = uuid.uuid4().hex

        def on_reply(reply, answer) -> bool:
            if not answer.done():
                answer.set_result(reply)
            return True

        return await self._channel.call(
            lambda reply_partition: Record.command(ValueType.ACTIVITY_TASK, intent, value, key=key,
                                                   request_id=request_id, reply_partition=reply_partition),
            partition_of, on_reply, rpc_timeout, request_id=request_id, intent=intent,
            idempotent=False)

    def close_event(self, key: int, since_ms: int | None, timeout: float | None) -> Record:
        """The event that closed activity `key`, read from its events partition."""
        topic = self.client.topics.events
        consumer = Consumer(consumer_config(
            self.client.bootstrap, f"{self.client.topics.namespace}.activity-result.{uuid.uuid4().hex}",
            **ClientLog("activity-result", interval_s=10).config()))
        try:
            start = TopicPartition(topic, partition_of_key(key), OFFSET_BEGINNING)
            if since_ms is not None:
                start = _offset_at(consumer, TopicPartition(
                    topic, start.partition, max(0, since_ms - _LOOKBACK_MS))) or start
            consumer.assign([start])
            deadline = None if timeout is None else time.monotonic() + timeout
            while deadline is None or time.monotonic() < deadline:
                for msg in consume_available(consumer, 500, 0.2):
                    if msg.error() is not None:
                        continue
                    record = codec.decode(msg.value(), msg.headers())
                    if (record.key == key and record.record_type is RecordType.EVENT
                            and record.intent in CLOSE_INTENTS):
                        return record
            raise TimeoutError(f"activity with key {key} did not close within {timeout} s")
        finally:
            close_in_background(consumer).join(10)  # bounded: the broker may be away

    async def wait_for_close_event(self, key: int, since_ms: int | None, timeout: float | None) -> Record:
        """`close_event` on a thread of this client's pool of event readers."""
        return await asyncio.get_running_loop().run_in_executor(
            self._readers, self.close_event, key, since_ms, timeout)

    def close(self) -> None:
        self._channel.close()
        self._readers.shutdown(wait=False)


@sync_proxied
class ActivityHandle:
    """A scheduled activity: wait for its result, or request its cancellation."""

    def __init__(self, client: ActivityClient, key: int, activity_id: str, activity_type: str,
                 scheduled_log_time_ms: int | None) -> None:
        self.key = key
        self.activity_id = activity_id
        self.activity_type = activity_type
        self._client = client
        self._since_ms = scheduled_log_time_ms
        self._closed: Record | None = None

    async def close_event(self, timeout: float | timedelta | None = None) -> Record:
        """ActivityTaskCompleted, -Failed, -TimedOut or -Canceled, once written."""
        if self._closed is None:
            seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
            self._closed = await self._client.wait_for_close_event(self.key, self._since_ms, seconds)
        return self._closed

    async def result(self, timeout: float | timedelta | None = None) -> Any:
        """The activity's result; raises `ActivityError` if it failed, timed out or was
        canceled, and `TimeoutError` if it did not close within `timeout`."""
        return outcome(await self.close_event(timeout), self._client.client.data_converter)

    async def cancel(self, rpc_timeout: float = 30) -> None:
        """Request cancellation: at once if no attempt runs, else when the activity
        acknowledges it. Raises `CommandRejectedError` if the activity is closed."""
        reply = await self._client._request(A.REQUEST_CANCEL, self.key, {}, lambda _n: partition_of_key(self.key), rpc_timeout)
        if reply.record.record_type is RecordType.COMMAND_REJECTION:
            raise _rejection(reply.record, self.activity_id)

    def __repr__(self) -> str:
        return f"ActivityHandle(key={self.key}, activity_id={self.activity_id!r})"


_CLOSE_MESSAGES = {A.FAILED: "Activity task failed", A.TIMED_OUT: "Activity task timed out",
                   A.CANCELED: "Activity task canceled"}


def outcome(event: Record, converter: DataConverter | None = None) -> Any:
    """The result of a close event, or the ActivityError (with its cause chain) it stands for."""
    converter = converter or DataConverter.default()
    v = event.value
    if event.intent == A.COMPLETED:
        return converter.decode(v["result"])
    if event.intent == A.CANCELED:
        retry_state = RetryState.CANCEL_REQUESTED
        cause = errors.CancelledError("Activity canceled", *converter.decode_details(v["details"]))
    else:
        retry_state = RetryState[v["retry_state"]] if v["retry_state"] in RetryState.__members__ \
            else RetryState.UNSPECIFIED
        cause = exception_from_failure(v["failure"], converter=converter)
    error = errors.ActivityError(
        _CLOSE_MESSAGES[event.intent], activity_id=v["activity_id"], activity_type=v["activity_type"],
        scheduled_event_id=v["scheduled_event_id"], started_event_id=v["started_event_id"],
        identity=v["identity"], retry_state=retry_state)
    raise error from cause


def _offset_at(consumer: Consumer, at: TopicPartition, timeout: float = 30) -> TopicPartition | None:
    """The first offset at or after `at`'s time, asking for up to `timeout` seconds (the
    broker may be restarting); None if there is none or no broker answered (then the
    whole partition is read: slower, complete)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            (found,) = consumer.offsets_for_times([at], max(deadline - time.monotonic(), 0.1))
            return found if found.offset >= 0 else None
        except KafkaException:
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.5)


def _rejection(record: Record, activity_id: str) -> Exception:
    if record.rejection_type == RejectionType.ALREADY_EXISTS:
        return errors.ActivityAlreadyStartedError(record.rejection_reason or "", activity_id=activity_id)
    return rejection_error(record)


def _duration(value: Timeout, name: str) -> timedelta:
    """A timeout as a timedelta; zero means none (the wire's 0)."""
    if value is None or value == SWF_NONE:
        return timedelta(0)
    if not isinstance(value, timedelta):
        raise TypeError(f"{name} must be a timedelta, None or {SWF_NONE!r}, got {value!r}")
    return value
