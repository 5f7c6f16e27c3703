"""A job worker: receives startable jobs from `tasks.<queue>`, STARTs, runs the handler, answers.

Kafka delivers each task record to one member of the queue's consumer group. The
worker sends START for the attempt it received and then COMPLETE or FAIL for that
attempt; all three go to the job's partition through one idempotent producer, so the
engine sees them in order. Redelivery is the engine's business (timeouts, retries):
offsets are committed automatically and a task is never consumed twice on purpose.
If the engine refused the START (another worker has that attempt), it refuses the
answer too, so a job is completed at most once whatever the workers do.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import orjson
import structlog
from confluent_kafka import Consumer

from streamproc.client.client import Client
from streamproc.kafka.admin import TopicAdmin
from streamproc.kafka.batching import consume_available
from streamproc.kafka.config import client_id, consumer_config
from streamproc.protocol import codec
from streamproc.protocol.topics import Topics, check_task_queue

log = structlog.get_logger("streamproc.worker")


@dataclasses.dataclass(frozen=True, slots=True)
class ActivatedJob:
    key: int
    attempt: int
    type: str
    payload: Any
    retries: int
    timeout_ms: int


class JobFailure(Exception):
    """Raise from a handler to fail the attempt with control over retries and backoff."""

    def __init__(self, message: str, retries: int | None = None,
                 retry_backoff: timedelta | None = None) -> None:
        super().__init__(message)
        self.retries = retries
        self.retry_backoff = retry_backoff


Handler = Callable[[ActivatedJob], Any]


class JobWorker:
    def __init__(self, task_queue: str, handler: Handler, *, bootstrap: str | None = None,
                 namespace: str | None = None, worker_id: str | None = None,
                 retry_backoff: timedelta = timedelta(0), partitions: int | None = None) -> None:
        problem = check_task_queue(task_queue)
        if problem:
            raise ValueError(problem)
        self.worker_id = worker_id or f"{socket.gethostname()}-{os.getpid()}"
        self.client = Client(bootstrap, namespace, **{"client.id": client_id("worker", self.worker_id)})
        self.task_queue = task_queue
        self.handler = handler
        self.retry_backoff = retry_backoff
        self.handled = 0
        self._partitions = partitions
        self._stop = threading.Event()

    def stop(self) -> None:
        self._stop.set()

    def run(self, max_jobs: int | None = None) -> None:
        topics: Topics = self.client.topics
        admin = TopicAdmin(self.client.bootstrap, topics)
        topic = admin.ensure_task_queue(self.task_queue, self._partitions or self.client.partitions)
        consumer = Consumer(consumer_config(self.client.bootstrap, topics.worker_group(self.task_queue), **{
            "client.id": client_id("worker", self.worker_id),
            "enable.auto.commit": True, "auto.commit.interval.ms": 1000,
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000,
        }))
        consumer.subscribe([topic], on_assign=self._on_assign)
        log.info("worker_started", task_queue=self.task_queue, worker=self.worker_id)
        try:
            while not self._stop.is_set() and (max_jobs is None or self.handled < max_jobs):
                for msg in consume_available(consumer, 100, 0.1):
                    if msg.error() is not None:
                        log.warning("task_consume_error", error=str(msg.error()))
                        continue
                    self._handle(codec.decode(msg.value(), msg.headers()))
        finally:
            consumer.close()
            self.client.flush()

    def _on_assign(self, consumer, partitions) -> None:
        log.info("tasks_assigned", task_queue=self.task_queue, worker=self.worker_id,
                 partitions=sorted(tp.partition for tp in partitions))

    def _handle(self, record) -> None:
        v = record.value
        job = ActivatedJob(key=record.key, attempt=v["attempt"], type=v["type"],
                           payload=orjson.loads(v["payload"]), retries=v["retries"],
                           timeout_ms=v["timeout_ms"])
        self.client.start_job(job.key, job.attempt, self.worker_id)
        try:
            result = self.handler(job)
        except JobFailure as failure:
            retries = failure.retries if failure.retries is not None else job.retries - 1
            backoff = failure.retry_backoff if failure.retry_backoff is not None else self.retry_backoff
            self.client.fail_job(job.key, job.attempt, retries, str(failure), backoff)
        except Exception as exc:  # any handler error fails the attempt, never the worker
            log.warning("job_handler_failed", job_key=job.key, attempt=job.attempt, error=repr(exc))
            self.client.fail_job(job.key, job.attempt, job.retries - 1,
                                 f"{type(exc).__name__}: {exc}", self.retry_backoff)
        else:
            self.client.complete_job(job.key, job.attempt, result)
        self.handled += 1
