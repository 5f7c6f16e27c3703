"""A job worker: receives startable jobs from `tasks.<queue>`, STARTs, runs the handler, answers.

Kafka delivers each task record to one member of the queue's consumer group. For each,
the worker sends START for the attempt it received and waits for the engine's answer on
its replies partition: only an accepted START runs the handler, so a task redelivered
after a rebalance (its first START already accepted for another worker) is refused and
runs nowhere twice. Then COMPLETE or FAIL for that attempt; every command about one job
goes to the job's partition through one idempotent producer, so the engine sees them in
order.

Nothing is stranded (`task_leases`): offsets are committed only past tasks whose START
was answered (`TaskOffsets`), so a worker killed mid-batch leaves the unstarted rest to
the partition's next owner; and a worker with a handler running past the job's timeout
(the engine has timed that attempt out and republished it on a partition this worker
owns) leaves the group until the handler returns, so the retry reaches a healthy worker.
Handlers run on a bounded pool of `max_concurrent` threads. STARTs do not hold a thread
while they wait for their answer (`PendingStarts`): up to `max_jobs_active` jobs are taken
at once, and the partitions are paused while that many are.

`start_unconfirmed=True` is the old, faster path: the handler runs as soon as START is
sent. It **may run twice after a rebalance** (a redelivered task whose first START was
accepted runs again; the engine refuses the second answer, not the side effect).

`push=True` registers a job stream on every engine partition (`job_streams.py`): the
engine activates jobs for this worker in the command that made them startable and pushes
the STARTED record to its replies partition, so a job takes no task record, no START and
one hop fewer. A pushed job is already started for this worker: its handler runs at once,
once per (key, attempt) however often the record is read. Jobs the engine had no credit
to push still come through the topic as above.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import orjson
import structlog

from streamproc.client.client import Client
from streamproc.kafka.admin import TopicAdmin
from streamproc.kafka.config import client_id, consumer_config
from streamproc.protocol.partitioning import partition_of_key
from streamproc.protocol.records import JobIntent, Record, RecordType, ValueType
from streamproc.protocol.topics import check_task_queue
from streamproc.kafka.replies import Reply, ReplyListener
from streamproc.metrics.worker_metrics import WorkerMetrics
from streamproc.worker.job_streams import JobStream, PushedAttempts, credits_per_partition, pushed_attempt_began
from streamproc.worker.task_intake import TaskIntake
from streamproc.worker.task_leases import OverdueAttempts, PendingStarts
from streamproc.worker.task_queue_membership import GROUP_TIMING, TaskQueueMembership, join_task_queue
from streamproc.worker.task_offsets import TaskOffsets

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
                 retry_backoff: timedelta = timedelta(0), partitions: int | None = None,
                 max_concurrent: int = 16, max_jobs_active: int = 256, start_unconfirmed: bool = False,
                 push: bool = False, metrics: WorkerMetrics | None = None) -> None:
        problem = check_task_queue(task_queue)
        if problem:
            raise ValueError(problem)
        if max_concurrent < 1:
            raise ValueError(f"max_concurrent must be >= 1, got {max_concurrent}")
        if max_jobs_active < max_concurrent:
            raise ValueError(f"max_jobs_active must be >= max_concurrent ({max_concurrent}), got {max_jobs_active}")
        self.worker_id = worker_id or f"{socket.gethostname()}-{os.getpid()}"
        self.client = Client(bootstrap, namespace, **{"client.id": client_id("worker", self.worker_id)})
        self.task_queue = task_queue
        self.handler = handler
        self.retry_backoff = retry_backoff
        #: Handlers running at once (threads).
        self.max_concurrent = max_concurrent
        #: Jobs taken and not finished: STARTs awaiting their answer, accepted jobs waiting
        #: for a thread, handlers running (Zeebe's maxJobsActive).
        self.max_jobs_active = max_jobs_active
        #: Run the handler without waiting for the engine to accept START (may run twice).
        self.start_unconfirmed = start_unconfirmed
        #: Also take the jobs the engine pushes to this worker's job stream.
        self.push = push
        #: Prometheus metrics (None: off).
        self.metrics = metrics
        #: Handlers that returned or raised.
        self.handled = 0
        #: STARTs the engine refused (the attempt was over, or another worker had it).
        self.refused = 0
        #: Jobs received by push, and jobs taken from the topic whose START was accepted.
        self.pushed = 0
        self.accepted_starts = 0
        self.offsets = TaskOffsets()
        self.overdue = OverdueAttempts()
        self.replies: ReplyListener | None = None
        #: The job stream (push=True, once `run` registered it).
        self.stream: JobStream | None = None
        #: Set once the stream is registered on every partition (push=True).
        self.stream_registered = threading.Event()
        self._pushes = PushedAttempts()
        #: Whether a push that arrived past its deadline was logged (once a worker).
        self._clock_ahead_said = False
        #: Set once the queue's consumer group gave this worker its partitions.
        self.ready = threading.Event()
        self._partitions = partitions
        self._stop = threading.Event()
        self._lock = threading.Condition()
        self._in_flight = 0
        self._membership: TaskQueueMembership | None = None
        self._intake: TaskIntake | None = None
        self._starts: PendingStarts | None = None
        self._pool: ThreadPoolExecutor | None = None

    def stop(self) -> None:
        self._stop.set()

    def run(self, max_jobs: int | None = None) -> None:
        """Take and run jobs until `stop()` (or `max_jobs` handled)."""
        topics = self.client.topics
        topic = TopicAdmin(self.client.bootstrap, topics).ensure_task_queue(
            self.task_queue, self._partitions or self.client.partitions)
        if not self.start_unconfirmed or self.push:
            self.replies = ReplyListener(self.client.bootstrap, topics).start()
        if not self.start_unconfirmed:
            self._starts = PendingStarts(self.replies, lambda cmd: self.client.send(cmd, partition_of_key(cmd.key)))
        config = consumer_config(self.client.bootstrap, topics.worker_group(self.task_queue), **{
            "client.id": client_id("worker", self.worker_id),
            "enable.auto.commit": True, "auto.commit.interval.ms": 1000, "enable.auto.offset.store": False,
            **GROUP_TIMING,
            **(self.metrics.consumer_config(self.task_queue, "job", topic) if self.metrics else {}),
        })
        intake = TaskIntake(topic, self.offsets, lambda task: task.value_type == ValueType.JOB, "job")
        self._intake = intake
        self._membership = intake.membership = join_task_queue(
            config, topic, topics.worker_group(self.task_queue), self.client.bootstrap, self.overdue,
            intake.assigned(self._on_assign), intake.on_revoke, self.task_queue, self.worker_id)
        self._pool = ThreadPoolExecutor(self.max_concurrent, thread_name_prefix="job")
        try:
            if self.push:  # after the pool: a push may arrive as soon as a partition registered us
                self._open_stream()
            log.info("worker_started", task_queue=self.task_queue, worker=self.worker_id, push=self.push)
            self._poll(intake, max_jobs)
        finally:
            if self.stream is not None:  # first: the engine stops pushing while we still take what comes
                self.stream.unregister()
            self._membership.consumer.close()  # leave the group at once: the queue's partitions move on
            self._pool.shutdown(wait=False, cancel_futures=True)
            if self.replies is not None:
                self.replies.close()
            self.client.flush()

    def _open_stream(self) -> None:
        """Register the job stream everywhere and keep it renewed (a thread, until `stop` or unregistering)."""
        partitions = self.client.partitions
        self.stream = JobStream(self.client, self.replies, queue=self.task_queue, worker=self.worker_id,
                                partitions=partitions, credits=credits_per_partition(self.max_jobs_active, partitions),
                                overdue=self.overdue, registered_everywhere=self.stream_registered)
        self.replies.expect_prefix(self.stream.push_prefix, self._pushed)
        threading.Thread(target=self.stream.run, args=(self._stop,), name="job-stream", daemon=True).start()

    def _on_assign(self, consumer, partitions) -> None:
        log.info("tasks_assigned", task_queue=self.task_queue, worker=self.worker_id,
                 partitions=sorted(tp.partition for tp in partitions))
        self.ready.set()

    def _poll(self, intake: TaskIntake, max_jobs: int | None) -> None:
        while not self._stop.is_set() and (max_jobs is None or self.handled < max_jobs):
            with self._lock:
                free = self.max_jobs_active - self._in_flight
            intake.poll(free, self._take)
            if self._starts is not None:
                self._starts.resend_due()

    def _take(self, task: Record, partition: int, offset: int) -> None:
        """A task from the queue: START it; its handler runs once the engine accepted that."""
        v = task.value
        job = ActivatedJob(key=task.key, attempt=v["attempt"], type=v["type"], payload=orjson.loads(v["payload"]),
                           retries=v["retries"], timeout_ms=v["timeout_ms"])
        if self._membership.hands_over():
            # About to leave the group: not started, not settled, redelivered elsewhere; or
            # offered to us again if we stay (`TaskIntake.hand_over`).
            self._intake.hand_over(task, partition, offset)
            return
        with self._lock:
            self._in_flight += 1
        sent_at = time.monotonic()
        value = {"attempt": job.attempt, "worker": self.worker_id}
        scheduled_ms = task.timestamp_ms  # the engine's time when it made this attempt startable
        if self.start_unconfirmed:
            self.client.send(Record.command(ValueType.JOB, JobIntent.START, value, key=job.key),
                             partition_of_key(job.key))
            self._started(job, partition, offset, sent_at, None, scheduled_ms)
            return
        command = Record.command(ValueType.JOB, JobIntent.START, value, key=job.key, request_id=uuid.uuid4().hex,
                                 reply_partition=self.replies.partition)
        self._starts.start(command, lambda reply: self._started(job, partition, offset, sent_at, reply, scheduled_ms))

    def _started(self, job: ActivatedJob, partition: int, offset: int, sent_at: float, reply: Reply | None,
                 scheduled_ms: int = 0) -> None:
        """The engine answered the START (None: not asked): run the handler if it accepted."""
        self.offsets.settled(partition, offset)
        accepted = reply is None or reply.record.record_type is not RecordType.COMMAND_REJECTION
        if self.metrics is not None and accepted:  # started: at the engine's START, or now when not asked
            started_ms = reply.record.timestamp_ms if reply is not None else int(time.time() * 1000)
            self.metrics.task_started(self.task_queue, "job", scheduled_ms, started_ms)
        if not accepted:
            log.info("job_start_refused", job_key=job.key, attempt=job.attempt,
                     rejection_type=reply.record.rejection_type, reason=reply.record.rejection_reason)
            with self._lock:
                self.refused += 1
            self._finished()
            return
        with self._lock:
            self.accepted_starts += 1
        self._submit(job, sent_at)

    def _pushed(self, reply: Reply) -> None:
        """A job the engine started for our stream (on the replies listener's thread): run it,
        unless this attempt was pushed before (a record read twice)."""
        record, v = reply.record, reply.record.value
        if record.value_type != ValueType.JOB or record.intent != JobIntent.STARTED:
            log.warning("job_push_unexpected", value_type=record.value_type, intent=record.intent,
                        request_id=record.request_id)
            return
        if not self._pushes.first(record.key, v["attempt"]):
            log.info("job_push_repeated", job_key=record.key, attempt=v["attempt"])
            return
        job = ActivatedJob(key=record.key, attempt=v["attempt"], type=v["type"], payload=orjson.loads(v["payload"]),
                           retries=v["retries"], timeout_ms=v["timeout_ms"])
        # Its timeout counts to the engine's deadline, not from now (`pushed_attempt_began`).
        now = time.monotonic()
        began = pushed_attempt_began(job.timeout_ms, v["deadline_ms"], record.timestamp_ms, reply.log_time_ms,
                                     int(time.time() * 1000), now)
        if began + job.timeout_ms / 1000 <= now:
            # Past its deadline as it arrives: this host's clock is ahead of the engine's (or the
            # record is that late). Dropped, it would be timed out and pushed here again without
            # end; run, it runs at worst once more, as a late START's job may.
            if not self._clock_ahead_said:
                self._clock_ahead_said = True
                log.warning("job_push_arrived_past_its_deadline", job_key=record.key, attempt=v["attempt"],
                            hint="this host's clock may be ahead of the engine's: pushed jobs count their "
                                 "timeout from their arrival here")
            began = now
        if self.metrics is not None:  # made startable and started in one command
            self.metrics.task_started(self.task_queue, "job", record.timestamp_ms, record.timestamp_ms)
        with self._lock:  # a slot like an accepted START's: the topic intake takes that many fewer
            self._in_flight += 1
            self.pushed += 1
        self._submit(job, began)

    def _submit(self, job: ActivatedJob, sent_at: float) -> None:
        try:
            self._pool.submit(self._run_handler, job, sent_at)
        except RuntimeError:  # the pool is shut down: the engine times the attempt out
            self._finished()

    def _run_handler(self, job: ActivatedJob, sent_at: float) -> None:
        timeout_s = job.timeout_ms / 1000
        lease = object()
        try:
            if time.monotonic() >= sent_at + timeout_s:
                # Waited for a thread past the job's timeout: the engine has timed it out.
                log.warning("job_expired_before_its_handler_ran", job_key=job.key, attempt=job.attempt)
                return
            self.overdue.begin(lease, timeout_s, f"job {job.key} attempt {job.attempt}", sent_at)
            self._handle(job)
        except Exception:  # a bug here must not leak a slot or kill the pool thread
            log.exception("job_attempt_crashed", job_key=job.key)
        finally:
            self.overdue.end(lease)
            self._finished()

    def _finished(self) -> None:
        with self._lock:
            self._in_flight -= 1
            self._lock.notify_all()

    def _handle(self, job: ActivatedJob) -> None:
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
        with self._lock:
            self.handled += 1
