"""The client: workflows, schedules and activities with asyncio, jobs fire and forget.

`Client` is Temporal's asyncio client (``client = await Client.connect()``; its
workflow, schedule and activity calls are coroutines). `SyncClient` (also what
``with Client() as client:`` gives) is the same client for blocking code: each call runs
on a private event loop thread (`client/sync_bridge.py`), so there is one
implementation.

Commands are produced to the partition that owns them: a CREATE to the partition of its
routing key (murmur2, as Java's client computes it), a command about an existing job to
the partition encoded in the job key. Sending is asynchronous; `flush()` waits, and says
which commands are not known to be on the log. A command sent while the broker is away
waits in the producer (librdkafka's idempotent retries, up to its `message.timeout.ms`,
300 s by default) and goes out, once, when the broker is back.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import timedelta
from typing import Any

import orjson
from confluent_kafka import KafkaException, Producer

from streamproc.client.async_activities import AsyncActivityOperations
from streamproc.client.delivery import Delivery, DeliveryState
from streamproc.client.errors import CommandsNotDeliveredError, RequestNotSentError
from streamproc.client.job_streams import JobStreamOperations
from streamproc.client.schedules import ScheduleOperations
from streamproc.client.sync_bridge import LoopThread, SyncProxy
from streamproc.client.temporal_gaps import CLIENT_METHODS, CONNECT_OPTIONS, missing_methods, refuse_options
from streamproc.client.workflows import WorkflowOperations
from streamproc.converter import DataConverter
from streamproc.kafka.client_log import ClientLog
from streamproc.client.sticky_partitions import StickyPartitions
from streamproc.kafka.config import producer_config
from streamproc.kafka.quiet_flush import LINGER_CAP_MS, QuietFlush
from streamproc.protocol import codec
from streamproc.protocol.partitioning import partition_for, partition_of_key
from streamproc.protocol.records import JobIntent, Record, ValueType
from streamproc.protocol.topics import Topics
from streamproc.settings import Settings


def _ms(value: timedelta) -> int:
    return int(value.total_seconds() * 1000)


class Client(WorkflowOperations, ScheduleOperations, AsyncActivityOperations, JobStreamOperations):
    """Temporal's asyncio client over Kafka (see the module's docstring)."""

    __getattr__ = missing_methods("Client", CLIENT_METHODS)

    def __init__(self, bootstrap: str | None = None, namespace: str | None = None, *,
                 data_converter: DataConverter | None = None, identity: str | None = None,
                 **producer_overrides: Any) -> None:
        settings = Settings.from_env(bootstrap=bootstrap, namespace=namespace)
        self.bootstrap = settings.bootstrap
        #: Who sends this client's signals (recorded in their events), as Temporal's client.
        self.identity = identity or f"{os.getpid()}@{socket.gethostname()}"
        self.topics = Topics(settings.namespace)
        #: Turns workflow and activity arguments, results and details into payloads.
        self.data_converter = data_converter or DataConverter.default()
        self._producer_overrides = producer_overrides
        # librdkafka's lines (a failed connection a second while the broker is away) once
        # per kind per interval.
        self._producer = Producer(producer_config(self.bootstrap, **{
            "linger.ms": LINGER_CAP_MS, **ClientLog("client").config(), **producer_overrides}))
        #: Sends a burst of commands as one request per partition once it ends, a lone one
        #: after QUIET_MS (`kafka/quiet_flush.py`); not when the caller chose a linger.
        self._quiet = None if "linger.ms" in producer_overrides else QuietFlush(self._producer)
        self._partitions: int | None = None
        #: Where new jobs without a routing key go.
        self._new_jobs = StickyPartitions()
        #: How long `send` waits for room in a full producer queue before giving up.
        self.send_timeout_s = 30.0
        #: Seconds between copies of a request that got no answer (`client/requests.py`).
        self.resend_interval_s = settings.client_resend_ms / 1000
        #: Commands sent since the last flush, by request id (or key), with their delivery.
        self._sent: list[tuple[str, Delivery]] = []
        self._prune_at = 10_000
        self._lock = threading.Lock()
        self._sync: SyncClient | None = None
        #: Entered while a caller waits for a workflow's result (None: nothing to do): the
        #: time-skipping test environment skips time only then, as Temporal's does.
        self.result_wait_scope: Callable[[], AbstractContextManager[Any]] | None = None

    @classmethod
    async def connect(cls, target_host: str | None = None, *, namespace: str | None = None,
                      data_converter: DataConverter | None = None, identity: str | None = None,
                      rpc_timeout: float = 30, **producer_overrides: Any) -> Client:
        """A client of the engine whose Kafka is at `target_host` (``"host:9092"``; default
        `STREAMPROC_BOOTSTRAP`), in `namespace` (default `STREAMPROC_NAMESPACE`). Returns
        once the broker answered and the engine's commands topic exists; raises
        RuntimeError naming the problem after `rpc_timeout` seconds. Other keywords are
        librdkafka properties (``log_level=0``); Temporal's gRPC options (`tls`, ...) raise
        NotImplementedError naming them."""
        refuse_options("Client.connect", {k: v for k, v in producer_overrides.items() if k in CONNECT_OPTIONS},
                       CONNECT_OPTIONS)
        client = cls(target_host, namespace, data_converter=data_converter, identity=identity,
                     **producer_overrides)
        try:
            await asyncio.to_thread(client.partition_count, rpc_timeout)
        except BaseException:
            await asyncio.to_thread(client.close)
            raise
        return client

    @property
    def known_partitions(self) -> int | None:
        """Partitions of the commands topic if known already (no broker round trip)."""
        return self._partitions

    @property
    def partitions(self) -> int:
        return self.partition_count(120)

    def partition_count(self, timeout: float) -> int:
        """Partitions of the commands topic, asking the broker for at most `timeout` seconds
        the first time, with our producer (its connection errors logged once per interval
        while the broker is away). Raises RuntimeError if none answered, or the topic is
        still missing then (no engine created it)."""
        deadline = time.monotonic() + timeout
        while self._partitions is None:
            error = "no broker answered"
            try:
                # All topics: asking for one by name would create it on brokers that do that.
                found = self._producer.list_topics(timeout=max(deadline - time.monotonic(), 0.1)).topics.get(
                    self.topics.commands)
                if found is not None and found.error is None and found.partitions:
                    self._partitions = len(found.partitions)
                    break
                error = f"{found.error if found is not None else 'no such topic'}"
            except KafkaException as exc:
                error = str(exc)
            if time.monotonic() >= deadline:
                raise RuntimeError(f"topic {self.topics.commands} not found within {timeout} s (is the engine "
                                   f"running with this namespace, is the broker up?): {error}")
            time.sleep(0.2)
        return self._partitions

    # jobs -------------------------------------------------------------------------------
    def create_job(self, type: str, payload: Any = None, *, retries: int = 3,
                   timeout: timedelta = timedelta(minutes=5), routing_key: str | None = None,
                   request_id: str | None = None) -> str:
        """Ask for a job on task queue `type`; returns the request id its CREATED event carries.
        The job lives on the partition of `routing_key`; without one, on the partition this
        client is putting its new jobs on for now (`client/sticky_partitions.py`)."""
        request_id = request_id or uuid.uuid4().hex
        value = {"type": type, "payload": orjson.dumps(payload).decode(), "retries": retries,
                 "timeout_ms": _ms(timeout)}
        try:
            partitions = self.partition_count(self.send_timeout_s)
        except RuntimeError as exc:
            raise RequestNotSentError(f"CREATE {request_id} not sent: {exc}", intent=JobIntent.CREATE,
                                      request_id=request_id) from None
        # Without a routing key, jobs created close together share a partition (`sticky_partitions.py`).
        partition = partition_for(routing_key, partitions) if routing_key else self._new_jobs.next(partitions)
        self.send(Record.command(ValueType.JOB, JobIntent.CREATE, value, request_id=request_id), partition)
        return request_id

    def start_job(self, key: int, attempt: int, worker: str) -> None:
        self._job_command(JobIntent.START, key, attempt=attempt, worker=worker)

    def complete_job(self, key: int, attempt: int, result: Any = None) -> None:
        self._job_command(JobIntent.COMPLETE, key, attempt=attempt, result=orjson.dumps(result).decode())

    def fail_job(self, key: int, attempt: int, retries: int, error_message: str = "",
                 retry_backoff: timedelta = timedelta(0)) -> None:
        self._job_command(JobIntent.FAIL, key, attempt=attempt, retries=retries,
                          error_message=error_message, retry_backoff_ms=_ms(retry_backoff))

    def update_job_retries(self, key: int, retries: int) -> None:
        self._job_command(JobIntent.UPDATE_RETRIES, key, retries=retries)

    def cancel_job(self, key: int) -> None:
        self._job_command(JobIntent.CANCEL, key)

    def _job_command(self, intent: str, key: int, **value: Any) -> None:
        self.send(Record.command(ValueType.JOB, intent, value, key=key), partition_of_key(key))

    # transport --------------------------------------------------------------------------
    def send(self, record: Record, partition: int, topic: str | None = None, *, urgent: bool = False) -> None:
        """Queue `record` for the log (the commands topic, or `topic`). Raises `RequestNotSentError` if the producer refused
        it (its queue stayed full for `send_timeout_s`, or it is dead): then it is certainly
        not on the log. `flush()` tells what became of the rest. `urgent`: the caller waits
        on its answer, so `hold_sends` does not keep it."""
        key = str(record.key if record.key >= 0 else record.request_id).encode()
        name = record.request_id or f"key:{record.key}"
        delivery = Delivery()
        deadline = time.monotonic() + self.send_timeout_s
        while True:
            try:
                self._producer.produce(topic or self.topics.commands, codec.encode(record), key,
                                       partition=partition, headers=codec.AVRO_HEADERS,
                                       on_delivery=delivery.report)
                break
            except BufferError:  # local queue full (the broker is away?): let deliveries drain
                if time.monotonic() >= deadline:
                    raise RequestNotSentError(
                        f"{record.intent} {name} not sent: the producer's queue stayed full for "
                        f"{self.send_timeout_s} s (is the broker reachable?)",
                        intent=record.intent, request_id=record.request_id or "") from None
                self._producer.poll(0.05)
            except KafkaException as exc:
                raise RequestNotSentError(f"{record.intent} {name} not sent: {exc}",
                                          intent=record.intent, request_id=record.request_id or "") from exc
        if self._quiet is not None:
            self._quiet.sent(urgent)
        with self._lock:
            self._sent.append((name, delivery))
            if len(self._sent) > self._prune_at:  # a client that never flushes (a worker)
                self._sent = [d for d in self._sent if d[1].state is not DeliveryState.DELIVERED]
                self._prune_at = max(10_000, 2 * len(self._sent))
        self._producer.poll(0)

    def hold_sends(self) -> None:
        """More commands are coming from work in progress (a worker's running attempts): those
        sent meanwhile wait for `release_sends`, or the producer's 5 ms linger, and go out
        together (`kafka/quiet_flush.py`)."""
        if self._quiet is not None:
            self._quiet.hold()

    def release_sends(self) -> None:
        if self._quiet is not None:
            self._quiet.release()

    @property
    def sends_held(self) -> int:
        """`hold_sends` not yet released (0 with a linger of the caller's)."""
        return self._quiet.holds if self._quiet is not None else 0

    def flush(self, timeout: float = 30) -> None:
        """Wait until every command sent so far is on the log. Raises
        `CommandsNotDeliveredError` naming those whose outcome is unknown (their delivery
        timed out or had not finished within `timeout`: they may be on the log, or get
        there later) apart from those certainly not sent."""
        self._producer.flush(timeout)
        with self._lock:
            sent, self._sent = self._sent, [d for d in self._sent if not d[1].state.settled]
        unknown = [name for name, d in sent if d.state in (DeliveryState.UNKNOWN, DeliveryState.PENDING)]
        not_sent = {name: d.error for name, d in sent if d.state is DeliveryState.NOT_WRITTEN}
        if unknown or not_sent:
            raise CommandsNotDeliveredError(unknown, not_sent)

    def close(self) -> None:
        """Stop the request channels and wait (blocking, up to 30 s) until every command
        sent is on the log. From asyncio: ``await client.aclose()``."""
        self.close_workflow_requests()
        self.close_schedule_calls()
        self.close_async_activity_requests()
        try:
            self.flush()
        finally:
            if self._quiet is not None:
                self._quiet.close()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    def __enter__(self) -> SyncClient:
        """``with Client() as client:`` is the synchronous client over this one."""
        self._sync = SyncClient(self)
        return self._sync

    def __exit__(self, *exc: object) -> None:
        sync, self._sync = self._sync, None
        if sync is not None:
            sync.close()
        else:
            self.close()


class SyncClient(SyncProxy):
    """The synchronous convenience over `Client`: the same methods, blocking::

        with SyncClient() as client:            # or: with Client() as client:
            handle = client.start_workflow(Greeting.run, "World", id="g-1", task_queue="hello")
            print(handle.result())

    `SyncClient(client)` wraps an existing `Client`; `SyncClient(bootstrap, namespace, ...)`
    makes one. Each call runs on this client's private event loop thread."""

    __slots__ = ()

    def __init__(self, client_or_bootstrap: Client | str | None = None, namespace: str | None = None,
                 **options: Any) -> None:
        client = (client_or_bootstrap if isinstance(client_or_bootstrap, Client)
                  else Client(client_or_bootstrap, namespace, **options))
        super().__init__(client, LoopThread())

    @property
    def async_client(self) -> Client:
        """The asyncio client this one runs."""
        return self._target

    def close(self) -> None:
        try:
            self._target.close()
        finally:
            self._loop.close()
