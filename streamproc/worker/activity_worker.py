"""An activity worker: receives attempts from `tasks.<queue>`, STARTs, runs the function, answers.

Kafka delivers each ACTIVITY_TASK record to one member of the queue's consumer group.
For each, the worker sends START and waits for the engine's answer on its replies
partition: only an accepted start runs the function (the engine refuses a start for an
attempt that is over or an activity that was cancelled before it started). Then it
answers COMPLETE, FAIL or REPORT_CANCELED for that attempt. Every command about one
activity goes to the activity's partition through one idempotent producer, so the
engine sees them in the order sent (a last heartbeat before the result, say).

Redelivery is the engine's business (timeouts, retries) once an attempt has started; until
the engine answered its START, a task is the broker's to redeliver: offsets are committed
automatically, but only past tasks whose START was answered (`TaskOffsets`), so a worker
killed or stopped before its START reached the engine leaves the task to the next owner
of the partition, whose START the engine refuses if the first one got there after all.
The worker takes no more tasks than it has free slots (it pauses its partitions when
full, and resumes them at once: `resume_now`), and none at all while an attempt of it
runs past the time the engine gave it: it leaves the queue's group until that attempt
returns, so the retry the engine republished reaches a healthy worker (`task_leases`).
The engine refuses answers for an
attempt that is over, so a slow worker cannot complete an activity twice or complete an
attempt that timed out; the refusal is logged. One attempt's life: `ActivityAttempt`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import structlog

from streamproc.activity.context import CancelReason
from streamproc.activity.definition import ActivityDefinition
from streamproc.client.client import Client
from streamproc.converter import DataConverter
from streamproc.kafka.admin import TopicAdmin
from streamproc.kafka.config import client_id, consumer_config
from streamproc.protocol.partitioning import partition_of_key
from streamproc.protocol.records import ActivityIntent, Record, ValueType
from streamproc.protocol.topics import check_task_queue
from streamproc.worker.activity_attempt import ActivityAttempt
from streamproc.worker.handed_tasks import HandedTasks
from streamproc.kafka.replies import Reply, ReplyListener
from streamproc.metrics.worker_metrics import WorkerMetrics
from streamproc.worker.task_intake import TaskIntake
from streamproc.worker.task_leases import OverdueAttempts
from streamproc.worker.task_queue_membership import GROUP_TIMING, TaskQueueMembership, join_task_queue
from streamproc.worker.task_offsets import TaskOffsets

log = structlog.get_logger("streamproc.worker")

A = ActivityIntent
#: At most this long, a stopping worker keeps its replies listener open for the workflow
#: tasks its workflow part still expects back (asked before it stopped asking).
HANDED_BACK_QUIET_S = 10.0


@dataclasses.dataclass
class WorkerStats:
    """What this worker did with the attempts it received."""

    #: Attempts the engine let this worker start.
    started: int = 0
    #: Answers sent: COMPLETE, FAIL, REPORT_CANCELED.
    completed: int = 0
    failed: int = 0
    canceled: int = 0
    #: Answers (COMPLETE, FAIL, REPORT_CANCELED) the engine refused: the attempt was over.
    rejected: int = 0
    #: Results never sent, because the attempt was already known to be over.
    dropped: int = 0
    #: Attempts the engine started for this worker at scheduling (eager execution).
    eager: int = 0
    #: Attempts whose function called `activity.raise_complete_async()`: answered by someone else.
    completing_async: int = 0


class ActivityWorker:
    def __init__(self, task_queue: str, activities: Iterable[Callable[..., Any]], *,
                 bootstrap: str | None = None, namespace: str | None = None,
                 identity: str | None = None, max_concurrent: int = 100,
                 graceful_shutdown_timeout: timedelta = timedelta(0),
                 partitions: int | None = None, data_converter: DataConverter | None = None,
                 metrics: WorkerMetrics | None = None, activity_executor: Executor | None = None) -> None:
        problem = check_task_queue(task_queue)
        if problem:
            raise ValueError(problem)
        if max_concurrent < 1:
            raise ValueError(f"max_concurrent must be >= 1, got {max_concurrent}")
        self.definitions: dict[str, ActivityDefinition] = {}
        for fn in activities:
            definition = ActivityDefinition.of(fn)
            if definition.name in self.definitions:
                raise ValueError(f"two activities are named {definition.name!r}")
            self.definitions[definition.name] = definition
        if not self.definitions:
            raise ValueError("an ActivityWorker needs at least one activity")
        self.client = Client(bootstrap, namespace, data_converter=data_converter)
        self.data_converter = self.client.data_converter
        self.namespace = self.client.topics.namespace  # for activity.info()
        self.task_queue = task_queue
        self.identity = identity or f"{os.getpid()}@{socket.gethostname()}"
        self.max_concurrent = max_concurrent
        self.graceful_shutdown_timeout = graceful_shutdown_timeout
        self.stats = WorkerStats()
        #: Prometheus metrics (None: off).
        self.metrics = metrics
        #: Set once the queue's consumer group gave this worker its partitions.
        self.ready = threading.Event()
        self.replies: ReplyListener | None = None
        #: The workflow worker of this process that takes handed-back workflow tasks (None: none).
        self.workflow_tasks: HandedTasks | None = None
        self.offsets = TaskOffsets()
        #: Attempts running here, with the time the engine gives each up (see task_leases).
        self.overdue = OverdueAttempts()
        self._membership: TaskQueueMembership | None = None
        self._intake: TaskIntake | None = None
        self._partitions = partitions
        self._stop = threading.Event()
        self._lock = threading.Condition()
        self._in_flight = 0
        self._running: set[ActivityAttempt] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        #: Where plain `def` activities run (None: the attempt's own thread of this worker's pool).
        self.activity_executor = activity_executor
        #: Where `async def` activities run (None: a loop of this worker's, in a thread of its own).
        self.activity_loop: asyncio.AbstractEventLoop | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._thread: threading.Thread | None = None

    # lifecycle ----------------------------------------------------------------------------
    def run(self) -> None:
        """Poll and run attempts until `stop()`; then give running ones the graceful timeout."""
        topics = self.client.topics
        topic = TopicAdmin(self.client.bootstrap, topics).ensure_task_queue(
            self.task_queue, self._partitions or self.client.partitions)
        self.replies = ReplyListener(self.client.bootstrap, topics).start()
        if self.activity_loop is not None:
            self._loop, loop_thread = self.activity_loop, None
        else:
            self._loop = asyncio.new_event_loop()
            loop_thread = threading.Thread(target=self._loop.run_forever, name="activity-loop", daemon=True)
            loop_thread.start()
        executor = self._executor = ThreadPoolExecutor(self.max_concurrent, thread_name_prefix="activity")
        config = consumer_config(self.client.bootstrap, topics.worker_group(self.task_queue), **{
            "client.id": client_id("worker", self.identity),
            "enable.auto.commit": True, "auto.commit.interval.ms": 1000, "enable.auto.offset.store": False,
            **GROUP_TIMING,
            **(self.metrics.consumer_config(self.task_queue, "activity", topic) if self.metrics else {}),
        })
        intake = TaskIntake(topic, self.offsets,
                            lambda task: task.value_type == ValueType.ACTIVITY_TASK and task.intent == A.ACTIVITY_TASK,
                            "activity")
        self._intake = intake
        self._membership = intake.membership = join_task_queue(
            config, topic, topics.worker_group(self.task_queue), self.client.bootstrap, self.overdue,
            intake.assigned(self._on_assign), intake.on_revoke, self.task_queue, self.identity)
        log.info("activity_worker_started", task_queue=self.task_queue, identity=self.identity,
                 activities=sorted(self.definitions))
        try:
            self._poll(intake)
        finally:
            self._membership.consumer.close()  # leave the group at once: the queue's partitions move on
            self._shut_down(executor, loop_thread)

    def start(self) -> ActivityWorker:
        """Run in a background thread; `stop()` (or leaving a `with` block) ends it."""
        self._thread = threading.Thread(target=self.run, name=f"activity-worker-{self.task_queue}",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Ask `run()` to return; safe from a signal handler (it does not wait)."""
        self._stop.set()

    def __enter__(self) -> ActivityWorker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        if self._thread is not None:
            self._thread.join(60)

    def _on_assign(self, consumer, partitions) -> None:
        log.info("tasks_assigned", task_queue=self.task_queue, identity=self.identity,
                 partitions=sorted(tp.partition for tp in partitions))
        self.ready.set()

    def _poll(self, intake: TaskIntake) -> None:
        while not self._stop.is_set():
            with self._lock:
                free = self.max_concurrent - self._in_flight
            intake.poll(free, self._take)

    def _take(self, task: Record, partition: int, offset: int) -> None:
        with self._lock:
            self._in_flight += 1
        self.client.hold_sends()  # released when the attempt ends: its answer goes with the others'
        self._executor.submit(self._run_attempt, task, partition, offset)

    def hands_over(self) -> bool:
        """Whether a task taken now is left unstarted for another worker (see task_leases)."""
        return self._membership is not None and self._membership.hands_over()

    # eager execution --------------------------------------------------------------------
    def reserve_slot(self) -> bool:
        """Hold a free slot for an activity the engine may start for us (eager execution)."""
        with self._lock:
            if self._takes_no_work() or self._in_flight >= self.max_concurrent:
                return False
            self._in_flight += 1
            return True

    def hand_slot_on(self, attempt: ActivityAttempt) -> bool:
        """Let `attempt`'s slot go on to its run's next activity, asked to run eagerly in the
        answer that rides with its completion (`ActivityAttempt._finish`): True the first
        time. Refused as `reserve_slot` refuses once the worker stops: the engine would start
        that activity for this worker, and its task would come after the pool shut down
        (dropped, the activity stranded until its start-to-close timeout)."""
        with self._lock:
            if attempt.slot_handed or self._takes_no_work():
                return False
            attempt.slot_handed = True
            return True

    def stopping(self) -> bool:
        """Whether the worker stops (or is not up): it asks the engine for no eager work."""
        with self._lock:
            return self._takes_no_work()

    def _takes_no_work(self) -> bool:
        """Under `_lock`: the worker stops, or its pool is not up (or gone)."""
        return self._executor is None or self._stop.is_set()

    def release_slot(self) -> None:
        """A held slot the engine did not fill."""
        with self._lock:
            self._in_flight -= 1
            self._lock.notify_all()

    def run_reserved(self, task: Record, slot_held: bool = True) -> None:
        """Run an attempt the engine started for us, in a slot held for it (or taken now:
        the engine took long to answer, and the held slot was given back meanwhile)."""
        self.count("eager")
        if not slot_held:
            with self._lock:
                self._in_flight += 1
        self.client.hold_sends()
        try:
            self._executor.submit(self._run_attempt, task, eager=True)
        except RuntimeError:  # the pool is shut down: the engine times the attempt out
            self.client.release_sends()
            log.warning("eager_activity_dropped_at_shutdown", activity_id=task.value["activity_id"])
            self.release_slot()

    def _run_attempt(self, task: Record, partition: int = -1, offset: int = -1, eager: bool = False) -> None:
        try:
            self._attempt(task, partition, offset, eager)
        finally:
            # The last attempt of a burst to end sends the burst's answers (one at a time: its own).
            self.client.release_sends()

    def _attempt(self, task: Record, partition: int, offset: int, eager: bool) -> None:
        if not eager and self.hands_over():
            # Left unstarted and unsettled for another member; offered again if we stay.
            self._intake.hand_over(task, partition, offset)
            with self._lock:
                self._in_flight -= 1
                self._lock.notify_all()
            return
        settle = (lambda: None) if eager else (lambda: self.offsets.settled(partition, offset))
        attempt = ActivityAttempt(self, task, settle, eager=eager)
        try:
            attempt.run()
        except Exception:  # a bug here must not leak a slot or kill the pool thread
            attempt.log.exception("activity_attempt_crashed")
        finally:
            attempt.settle()  # in case a bug skipped it
            self.overdue.end(attempt)
            with self._lock:
                if not attempt.slot_handed:  # else the run's next activity holds it (`hand_slot_on`)
                    self._in_flight -= 1
                self._running.discard(attempt)
                self._lock.notify_all()

    def _shut_down(self, executor: ThreadPoolExecutor, loop_thread: threading.Thread | None) -> None:
        with self._lock:
            self._lock.wait_for(lambda: self._in_flight == 0, self.graceful_shutdown_timeout.total_seconds())
            abandoned = list(self._running)
        for attempt in abandoned:
            attempt.ctx.cancel(CancelReason.WORKER_SHUTDOWN)
        if abandoned:
            log.warning("activities_abandoned_at_shutdown", count=len(abandoned),
                        activity_ids=sorted(a.activity_id for a in abandoned))
            # Async ones end at the cancellation; let them, so the loop stops with no task
            # pending. Sync ones learn of it at their next heartbeat, whenever that is.
            with self._lock:
                self._lock.wait_for(lambda: not any(a.ctx.is_async for a in self._running), 1.0)
        executor.shutdown(wait=False, cancel_futures=True)
        self.client.flush()
        if self.workflow_tasks is not None:  # the workflow part hears its handed-back tasks here
            self.workflow_tasks.wait_quiet(HANDED_BACK_QUIET_S)
        self.replies.close()
        if loop_thread is not None:  # our own loop; a caller's loop is the caller's to stop
            self._loop.call_soon_threadsafe(self._loop.stop)
            loop_thread.join(5)
            if not loop_thread.is_alive():
                self._loop.close()
        log.info("activity_worker_stopped", task_queue=self.task_queue, stats=dataclasses.asdict(self.stats))

    # sending -----------------------------------------------------------------------------
    def send(self, key: int, intent: str, value: dict[str, Any], request_id: str | None = None,
             on_reply: Callable[[Reply], bool | None] | None = None, ttl_s: float = 600, urgent: bool = False) -> str:
        """Send a command about activity `key`, answered on our replies partition (`urgent`:
        the attempt waits on the answer, so the running attempts' hold does not keep it)."""
        request_id = request_id or uuid.uuid4().hex
        if on_reply is not None:
            self.replies.expect(request_id, on_reply, ttl_s)
        self.client.send(Record.command(ValueType.ACTIVITY_TASK, intent, value, key=key,
                                        request_id=request_id, reply_partition=self.replies.partition),
                         partition_of_key(key), urgent=urgent)
        return request_id

    def count(self, field: str) -> None:
        with self._lock:
            setattr(self.stats, field, getattr(self.stats, field) + 1)
