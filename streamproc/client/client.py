"""Send job commands to the engine from Python.

Commands are produced to the partition that owns them: a CREATE to the partition of its
routing key (murmur2, as Java's client computes it), a command about an existing job to
the partition encoded in the job key. Sending is asynchronous; `flush()` waits.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import orjson
from confluent_kafka import Producer

from streamproc.client.workflows import WorkflowOperations
from streamproc.converter import DataConverter
from streamproc.kafka.admin import TopicAdmin
from streamproc.kafka.config import producer_config
from streamproc.protocol import codec
from streamproc.protocol.partitioning import partition_for, partition_of_key
from streamproc.protocol.records import JobIntent, Record, ValueType
from streamproc.protocol.topics import Topics
from streamproc.settings import Settings


def _ms(value: timedelta) -> int:
    return int(value.total_seconds() * 1000)


class Client(WorkflowOperations):
    def __init__(self, bootstrap: str | None = None, namespace: str | None = None, *,
                 data_converter: DataConverter | None = None, **producer_overrides: Any) -> None:
        settings = Settings.from_env(bootstrap=bootstrap, namespace=namespace)
        self.bootstrap = settings.bootstrap
        self.topics = Topics(settings.namespace)
        #: Turns workflow and activity arguments, results and details into payloads.
        self.data_converter = data_converter or DataConverter.default()
        self._producer = Producer(producer_config(self.bootstrap, **producer_overrides))
        self._partitions: int | None = None
        self._errors: list[str] = []

    @property
    def partitions(self) -> int:
        if self._partitions is None:
            self._partitions = TopicAdmin(self.bootstrap, self.topics).partitions(self.topics.commands, 120)
        return self._partitions

    # jobs -------------------------------------------------------------------------------
    def create_job(self, type: str, payload: Any = None, *, retries: int = 3,
                   timeout: timedelta = timedelta(minutes=5), routing_key: str | None = None,
                   request_id: str | None = None) -> str:
        """Ask for a job on task queue `type`; returns the request id its CREATED event carries."""
        request_id = request_id or uuid.uuid4().hex
        value = {"type": type, "payload": orjson.dumps(payload).decode(), "retries": retries,
                 "timeout_ms": _ms(timeout)}
        partition = partition_for(routing_key or request_id, self.partitions)
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
    def send(self, record: Record, partition: int) -> None:
        key = str(record.key if record.key >= 0 else record.request_id).encode()
        while True:
            try:
                self._producer.produce(self.topics.commands, codec.encode(record), key,
                                       partition=partition, headers=codec.AVRO_HEADERS,
                                       on_delivery=self._on_delivery)
                break
            except BufferError:  # local queue full: let deliveries drain, then retry
                self._producer.poll(0.05)
        self._producer.poll(0)

    def _on_delivery(self, err, msg) -> None:
        if err is not None:
            self._errors.append(str(err))

    def flush(self, timeout: float = 30) -> None:
        """Wait until every command sent so far is on the log; raises if any was lost."""
        remaining = self._producer.flush(timeout)
        if remaining:
            raise TimeoutError(f"{remaining} commands not delivered within {timeout} s")
        if self._errors:
            errors, self._errors = self._errors, []
            raise RuntimeError(f"{len(errors)} commands failed to send, first: {errors[0]}")

    def close(self) -> None:
        self.close_workflow_requests()
        self.flush()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
