"""A workflow worker: receives workflow tasks from `workflow-tasks.<queue>` and answers them.

Kafka delivers each WORKFLOW_TASK record to one member of the queue's consumer group
(`Topics.workflow_worker_group`). The worker puts paged histories back together, runs
the workflow code to its next block (the pure part is in `workflow_activation`), and
sends TASK_COMPLETE or TASK_FAIL to the run's partition of the commands topic (murmur2
of the workflow id, as the client does). A task usually carries only the events after
the run's previous completed task: a workflow id always maps to the same task partition,
so the worker that answered that task has the run cached. Any other worker (new, after a
rebalance, or after evicting the run) fetches the whole history with the client's paged
GET_HISTORY first.

Offsets are committed only once the answers of a batch are on the log (flushed), so a
worker that dies loses nothing: the tasks it had not answered are delivered again to
whoever gets the partition, and if that answer comes too late the engine's task timeout
schedules the task again. Apart from its sticky cache (an optimisation), a worker keeps
no state. Tasks run one at a time: workflow code only computes (activities do the
waiting), so a task is short. A task whose code waits on local activities waits for them
on the thread that took it (they run on the runner's own loop and threads), at most 80%
of its task timeout, after which it is answered as a workflow task heartbeat and the run's
next task carries on with them.

The tasks the engine hands back on the replies partition (`handed_tasks`) are taken by a
thread of their own (`handed_task_thread`), so that each source's thread blocks on it
alone; the two take turns to run what they took.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import socket
import threading
import time
from collections.abc import Iterable
from typing import Any

import structlog
from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from streamproc.client.client import SyncClient
from streamproc.client.errors import CommandsNotDeliveredError
from streamproc.converter import DataConverter
from streamproc.kafka.admin import TopicAdmin
from streamproc.kafka.batching import consume_available
from streamproc.kafka.config import client_id, consumer_config
from streamproc.kafka.replies import ReplyListener
from streamproc.metrics.worker_metrics import WorkerMetrics
from streamproc.protocol import codec
from streamproc.protocol.partitioning import partition_for
from streamproc.protocol.records import ValueType, WorkflowIntent
from streamproc.protocol.topics import check_task_queue
from streamproc.worker.task_leases import OverdueAttempts
from streamproc.worker.task_queue_membership import GROUP_TIMING, TaskQueueMembership
from streamproc.worker.sticky_cache import StickyCache
from streamproc.worker.handed_tasks import HandedTasks
from streamproc.worker.handed_task_thread import HandedTaskThread
from streamproc.worker.marker_journal import MarkerJournal
from streamproc.worker.ride_along import RideAlong
from streamproc.worker.task_turns import TaskTurns
from streamproc.worker.workflow_activation import InstanceFactory, PendingAnswer, WorkflowTaskHandler
from streamproc.worker.workflow_queries import QueryAnswerer
from streamproc.worker.workflow_worker_stats import WorkflowWorkerStats
from streamproc.worker.workflow_task_pages import TaskPageAssembler, WorkflowTask, one_record_task
from streamproc.workflow.local_activity_runner import LocalActivityRunner

log = structlog.get_logger("streamproc.worker")

__all__ = ["WorkflowWorker", "WorkflowWorkerStats"]

#: Tasks taken from Kafka per poll: answers are flushed and offsets committed per batch.
MAX_BATCH = 100
#: How long a poll of the task queue waits for a task: how often the consumer's thread sees
#: to the group membership and to `stop` while no task comes.
POLL_S = 0.1
#: How long to wait for GET_HISTORY's pages before failing the task (the engine then
#: sends the next attempt with the whole history).
HISTORY_FETCH_TIMEOUT_S = 20.0


class WorkflowWorker:
    def __init__(self, task_queue: str, workflows: Iterable[type], *,
                 bootstrap: str | None = None, namespace: str | None = None,
                 identity: str | None = None, max_cached_workflows: int = 1000,
                 partitions: int | None = None, new_instance: InstanceFactory | None = None,
                 data_converter: DataConverter | None = None, metrics: WorkerMetrics | None = None,
                 checkpoint_local_activities: bool = False, disable_workflow_task_hand_back: bool = False,
                 disable_workflow_task_ride_along: bool = False) -> None:
        """`checkpoint_local_activities`: each local activity's marker is on the log before
        the code's next local activity starts (journaled while the task is out,
        `marker_journal`; off: Temporal's way, the markers go with the task's completion).
        `disable_workflow_task_hand_back`: answers do not ask for the run's next task back
        (see `handed_tasks`); every task then comes through the task queue.
        `disable_workflow_task_ride_along`: an activity's completion never carries the run's
        next task's answer (see `ride_along`; it needs the hand-back)."""
        problem = check_task_queue(task_queue)
        if problem:
            raise ValueError(problem)
        from streamproc.workflow.definition import WorkflowDefinition

        definitions: dict[str, Any] = {}
        for cls in workflows:
            definition = WorkflowDefinition.of(cls)
            if definition.name in definitions:
                raise ValueError(f"two workflows are named {definition.name!r}")
            definitions[definition.name] = definition
        if not definitions:
            raise ValueError("a WorkflowWorker needs at least one workflow")
        # Blocking calls (history fetches) from the worker's threads: the synchronous face.
        self.client = SyncClient(bootstrap, namespace, data_converter=data_converter)
        #: The same client unwrapped, for what each answer calls (`send`, `partitions`): the
        #: blocking face looks up and wraps every attribute it is asked for.
        self._sender = self.client.async_client
        self.task_queue = task_queue
        self.identity = identity or f"{os.getpid()}@{socket.gethostname()}"
        self.stats = WorkflowWorkerStats()
        #: Prometheus metrics (None: off).
        self.metrics = metrics
        #: Runs the local activities of this worker's runs (inside their workflow tasks).
        self.local_activities = LocalActivityRunner(data_converter=self.client.data_converter)
        new_instance = new_instance or functools.partial(
            _new_instance, data_converter=self.client.data_converter, namespace=self.client.topics.namespace,
            local_activities=self.local_activities, checkpoint_local_activities=checkpoint_local_activities)
        self.handler = WorkflowTaskHandler(definitions, self.identity, new_instance,
                                           StickyCache(max_cached_workflows), self._fetch_history)
        self.queries = QueryAnswerer(definitions, self.handler.cache, new_instance, self._whole_history)
        #: The tasks the engine hands back to this worker (its listener starts with `run`).
        self.handed = None if disable_workflow_task_hand_back else HandedTasks(
            None, self.handler.cache.answered_event_id, self.handler.cache.forget_answer)
        self.handler.handed = self.handed
        if checkpoint_local_activities:  # its producer and thread are made at its first journal
            sender = self._sender
            self.handler.journal = MarkerJournal(sender.bootstrap, sender.topics.commands, lambda: sender.partitions,
                                                 self.identity, self.stats)
        #: Set once the queue's consumer group gave this worker its partitions.
        self.ready = threading.Event()
        self._pages = TaskPageAssembler()
        #: The offsets last committed (asynchronously) per partition, made sure of when stopping.
        self._last_offsets: dict[tuple[str, int], TopicPartition] = {}
        self._partitions = partitions
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: The two threads that take tasks (the queue's, the handed-back ones') run them one at a time.
        self._turns = TaskTurns()
        if self.handed is not None and not disable_workflow_task_ride_along:
            self.handed.ride_along = RideAlong(self.handler, self.handed, self._turns, self.stats,
                                              metrics, task_queue)

    @property
    def definitions(self) -> dict[str, Any]:
        return dict(self.handler.definitions)

    # lifecycle ----------------------------------------------------------------------------
    def run(self) -> None:
        """Poll and answer tasks until `stop()`."""
        topics = self.client.topics
        topic = topics.workflow_tasks(self.task_queue)
        TopicAdmin(self.client.bootstrap, topics).ensure(
            {topic: (self._partitions or self.client.partitions, {})})
        # Workflow tasks have no attempts that go overdue on a worker (a workflow task times out
        # on the engine and is scheduled again): the membership only gets the worker back into
        # its group when its consumer stops taking part in it.
        lag = self.metrics.consumer_config(self.task_queue, "workflow", topic) if self.metrics else {}
        membership = TaskQueueMembership(
            consumer_config(self.client.bootstrap, topics.workflow_worker_group(self.task_queue),
                            **{"client.id": client_id("worker", self.identity), **GROUP_TIMING,
                               # it answers a batch of tasks between two polls: more room
                               "max.poll.interval.ms": 60_000, "on_commit": self._on_commit}, **lag),
            OverdueAttempts(),
            lambda consumer: consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                                                on_lost=self._on_revoke),
            lambda consumer: None, self.task_queue, self.identity)
        if self.handed is not None and self.handed.replies_of is None:  # none to share: a listener of its own
            self.handed.replies = ReplyListener(self.client.bootstrap, topics).start()
        membership.join()
        handed_thread = None if self.handed is None else HandedTaskThread(
            self.handed, self._turns, self._answer_handed, lambda exc: self._stop.set(),
            f"workflow-worker-{self.task_queue}-handed").start()
        log.info("workflow_worker_started", task_queue=self.task_queue, identity=self.identity,
                 workflows=sorted(self.handler.definitions))
        try:
            while not self._stop.is_set():
                membership.may_take_tasks()
                consumer = membership.consumer
                messages = consume_available(consumer, MAX_BATCH, POLL_S)
                with self._turns:
                    if messages:
                        self._answer_batch(consumer, messages)
                    self._release_overdue_slots()
            if handed_thread is not None:
                handed_thread.stop()
                if handed_thread.failure is not None:
                    raise handed_thread.failure
            if self._last_offsets:  # the last asynchronous commits, made sure of
                try:
                    membership.consumer.commit(offsets=list(self._last_offsets.values()), asynchronous=False)
                except KafkaException as exc:
                    log.warning("workflow_task_commit_failed", error=str(exc.args[0]))
        finally:
            if handed_thread is not None:  # (after an error: its answers still go)
                handed_thread.stop()
            membership.consumer.close()  # leave the group at once: the queue's partitions move on
            self._give_back_slots()
            if self.handed is not None and self.handed.replies is not None:
                self.handed.replies.close()
            if self.handler.journal is not None:  # (first: what it holds goes before the rest closes)
                self.handler.journal.close()
            self.client.close_workflow_requests()
            self.local_activities.close()
            log.info("workflow_worker_stopped", task_queue=self.task_queue,
                     stats=dataclasses.asdict(self.stats))

    def start(self) -> WorkflowWorker:
        """Run in a background thread; `stop()` (or leaving a `with` block) ends it."""
        self._thread = threading.Thread(target=self.run, name=f"workflow-worker-{self.task_queue}",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Ask `run()` to return; safe from a signal handler (it does not wait)."""
        self._stop.set()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def __enter__(self) -> WorkflowWorker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.join(60)

    def _on_assign(self, consumer, partitions) -> None:
        log.info("workflow_tasks_assigned", task_queue=self.task_queue, identity=self.identity,
                 partitions=sorted(tp.partition for tp in partitions))
        self.ready.set()

    def _on_revoke(self, consumer, partitions) -> None:
        self._pages.forget_partitions({tp.partition for tp in partitions})
        for tp in partitions:
            self._last_offsets.pop((tp.topic, tp.partition), None)

    # handed-back tasks (on their own thread, in its turn) ------------------------------------
    def _answer_handed(self, records: list) -> None:
        self._answer_batch(None, [], self._handed_tasks(records))
        self._release_overdue_slots()

    def _give_back_slots(self) -> None:
        """At the end, the activity slots held for answers, in a turn: a completion riding
        along that has the turn reserves before they are given back, and one that takes it
        after sees the hand-back stopped and reserves nothing (`ride_along`)."""
        if self.handler.eager is not None:
            with self._turns:
                self.handler.eager.release_all()

    def _release_overdue_slots(self) -> None:
        if self.handler.eager is not None:
            self.handler.eager.release_overdue()

    def _handed_tasks(self, records: list) -> list[tuple[WorkflowTask, int]]:
        """Tasks the engine handed back to this worker, each with the engine's time on its
        record; one record each, not the page assembler's (the consumer thread's state)."""
        tasks = []
        for record in records:
            try:
                tasks.append((one_record_task(record), record.timestamp_ms))
            except (ValueError, KeyError) as exc:
                log.warning("workflow_task_unusable", handed_back=True, error=str(exc))
                self.stats.skipped += 1
        self.stats.handed_back += len(tasks)
        return tasks

    # answering ----------------------------------------------------------------------------
    def _answer_batch(self, consumer: Consumer | None, messages: list[Message],
                      handed: list[tuple[WorkflowTask, int]] = ()) -> None:
        waiting: list[PendingAnswer] = []
        for task, scheduled_ms in handed:  # nothing to commit for them: they came as replies
            pending = self._run(task, scheduled_ms)
            if pending is not None:
                waiting.append(pending)
        if not messages:
            # Their answers go out with the producer's linger: no offsets wait on them.
            self.handler.answer_when_local_activities_end(waiting, self._send_answer)
            return
        ends: dict[tuple[str, int], int] = {}
        firsts: dict[tuple[str, int], int] = {}
        for msg in messages:
            if msg.error() is not None:
                log.warning("workflow_task_consume_error", error=str(msg.error()))
                continue
            ends[(msg.topic(), msg.partition())] = msg.offset() + 1
            firsts.setdefault((msg.topic(), msg.partition()), msg.offset())
            pending = self._answer(msg)
            if pending is not None:
                waiting.append(pending)
        sought_back = False
        if waiting and self.handler.journal is not None:
            # Checkpointing: a task whose worker dies from now on is the engine's to time out
            # and retry with the markers journaled for it (its steps do not run again), not
            # the queue's to deliver again as it came (they would).
            sought_back = not self._commit_answered(consumer, messages, ends, firsts)
        self.handler.answer_when_local_activities_end(waiting, self._send_answer)
        if not sought_back:  # (else the batch comes again: its offsets stay)
            self._commit_answered(consumer, messages, ends, firsts)

    def _commit_answered(self, consumer: Consumer, messages: list[Message], ends: dict[tuple[str, int], int],
                         firsts: dict[tuple[str, int], int]) -> bool:
        """False if the answers were not all delivered: the batch is sought back to be answered again."""
        # 1. every answer sent is on the log ...
        try:
            self.client.flush()
        except CommandsNotDeliveredError as exc:
            # The broker is away (or was): answer the batch again once it is back. Answers
            # that landed after all make the engine refuse the second copy, harmlessly.
            log.warning("workflow_task_answers_not_delivered_retrying", error=str(exc), tasks=len(messages))
            for (topic, partition), first in firsts.items():
                try:
                    consumer.seek(TopicPartition(topic, partition, first))
                except KafkaException:  # taken away meanwhile: its next owner answers
                    pass
            return False
        # 2. ... then its tasks are done, except pages of tasks that are not whole yet.
        offsets = [TopicPartition(topic, partition, min([end, *self._pages.pending_offsets(partition)]))
                   for (topic, partition), end in ends.items()]
        if offsets:
            # Asynchronous: the answers are on the log already, so waiting for the commit
            # would only hold up the next tasks. A commit that fails (a rebalance moved the
            # group on) leaves the tasks to the partitions' next owner, and the engine
            # refuses answers to tasks that are already answered (`_on_commit`).
            consumer.commit(offsets=offsets, asynchronous=True)
            self._last_offsets.update(((tp.topic, tp.partition), tp) for tp in offsets)
        return True

    def _on_commit(self, err, partitions) -> None:
        if err is not None:
            log.warning("workflow_task_commit_failed", error=str(err))

    def _answer(self, msg: Message) -> PendingAnswer | None:
        try:
            record = codec.decode(msg.value(), msg.headers())
            if record.value_type == ValueType.WORKFLOW and record.intent == WorkflowIntent.QUERY_TASK:
                self._answer_query(record)
                return
            if record.value_type != ValueType.WORKFLOW or record.intent != WorkflowIntent.WORKFLOW_TASK:
                raise ValueError(f"not a workflow task: {record.value_type} {record.intent}")
            task = self._pages.add(record, msg.partition(), msg.offset())
        except (codec.DecodeError, ValueError, KeyError) as exc:
            log.warning("workflow_task_unusable", partition=msg.partition(), offset=msg.offset(),
                        error=str(exc))
            self.stats.skipped += 1
            return
        if task is None:
            return
        if record.value.get("pages", 1) > 1:
            self.stats.paged += 1
        return self._run(task, record.timestamp_ms)

    def _run(self, task: WorkflowTask, scheduled_ms: int | None = None) -> PendingAnswer | None:
        """Run `task`'s code and send its answer, or return it while its local activities run."""
        metrics = self.metrics
        if metrics is not None:
            if scheduled_ms is not None:  # scheduled: the engine's time on the task's record
                metrics.task_started(self.task_queue, "workflow", scheduled_ms, time.time_ns() // 1_000_000)
            began = time.monotonic()
        answer = self.handler.answer(task, wait=False)
        if metrics is not None:
            metrics.workflow_task_executed(self.task_queue, time.monotonic() - began)
        if isinstance(answer, PendingAnswer):
            return answer
        self._send_answer(task, answer)
        return None

    def _send_answer(self, task: WorkflowTask, answer) -> None:
        if answer is None:
            self.stats.unanswered += 1
        else:
            sender = self._sender
            sender.send(answer, partition_for(task.workflow_id, sender.partitions))
            if answer.intent == WorkflowIntent.TASK_COMPLETE:
                self.stats.completed += 1
            else:
                self.stats.failed += 1
        cache = self.handler.cache
        self.stats.cache_hits, self.stats.cache_misses = cache.hits, cache.misses
        self.stats.history_fetches = self.handler.fetches
        self.stats.incomplete = self._pages.dropped

    def _answer_query(self, record) -> None:
        """Straight to the caller's replies partition: a query's answer is no command."""
        self.client.send(self.queries.answer(record), record.reply_partition, topic=self.client.topics.replies)
        self.stats.queries += 1

    def _fetch_history(self, task: WorkflowTask) -> list[dict[str, Any]]:
        return self._whole_history(task.workflow_id, task.run_id)

    def _whole_history(self, workflow_id: str, run_id: str) -> list[dict[str, Any]]:
        handle = self.client.get_workflow_handle(workflow_id, run_id=run_id)
        return handle.fetch_history(rpc_timeout=HISTORY_FETCH_TIMEOUT_S).events


def _new_instance(definition: Any, history: list[dict[str, Any]], run_id: str, *,
                  data_converter: DataConverter, local_activities: LocalActivityRunner,
                  checkpoint_local_activities: bool, namespace: str = ""):
    from streamproc.workflow.instance import WorkflowInstance

    return WorkflowInstance(definition, history, run_id=run_id, data_converter=data_converter, namespace=namespace,
                            local_activities=local_activities, checkpoint_local_activities=checkpoint_local_activities)
