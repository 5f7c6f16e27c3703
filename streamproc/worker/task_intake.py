"""The polling side of a task queue worker, shared by job and activity workers.

Takes task records from the queue's partitions no faster than the worker has free slots
(paused rather than not polled while full: a worker busy for longer than the poll interval
must keep its group membership), hands each task to the worker, and lets auto-commit
commit only past tasks whose START was answered (`TaskOffsets`). While the worker is out
of the group (`TaskQueueMembership`: an attempt overdue) it only serves the rebalance.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import structlog
from confluent_kafka import Consumer, KafkaException, TopicPartition

from streamproc.kafka.batching import consume_available, resume_now
from streamproc.protocol import codec
from streamproc.protocol.records import Record
from streamproc.worker.task_queue_membership import TaskQueueMembership
from streamproc.worker.task_offsets import TaskOffsets

log = structlog.get_logger("streamproc.worker")


class TaskIntake:
    def __init__(self, topic: str, offsets: TaskOffsets, accepts: Callable[[Record], bool], kind: str) -> None:
        """`accepts(record)`: whether a decoded record is a task of this worker's `kind`."""
        self._topic = topic
        self._offsets = offsets
        self._accepts = accepts
        self._kind = kind
        self._paused = False
        #: Set by a new assignment: the pause state is applied to it again.
        self._reassert_pause = False
        #: Set once the worker joined the group (it needs `on_revoke` to subscribe); it holds
        #: the queue's consumer.
        self.membership: TaskQueueMembership | None = None
        #: Tasks left unstarted for another member (`hand_over`), kept until the worker
        #: either leaves the group (then its partitions' next owners redeliver them) or stays.
        self._handed_over: list[tuple[Record, int, int]] = []
        self._handed_over_lock = threading.Lock()

    def hand_over(self, task: Record, partition: int, offset: int) -> None:
        """A task the worker leaves unstarted because it is about to leave the group (an
        attempt overdue). Its offset stays unsettled. If the worker stays after all (the
        overdue attempt ended first), the consumer has read past it and would never give it
        again: `poll` offers it to the worker once more, or the attempt would be stranded,
        dispatched and never started (seen under load in the crash and takeover tests).
        Thread-safe: attempts call it."""
        with self._handed_over_lock:
            self._handed_over.append((task, partition, offset))

    def assigned(self, then: Callable[[Consumer, list[TopicPartition]], None]) -> Callable:
        """The group's on_assign: the next poll gives the whole assignment this intake's pause
        state, then `then` is called. librdkafka keeps a partition's pause flag across a
        rebalance, so a partition paused, taken away, and given back after the intake resumed
        (resuming an empty assignment) stayed paused for good: a worker polled on, with free
        slots, and took nothing (seen after broker restarts in the fault tests)."""
        def on_assign(consumer: Consumer, partitions: list[TopicPartition]) -> None:
            self._reassert_pause = True
            then(consumer, partitions)
        return on_assign

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Partitions taken away: what is settled goes with the revocation's commit, the rest
        is the next owner's to redeliver."""
        self.store_offsets()
        self._offsets.forget({tp.partition for tp in partitions})

    def poll(self, free_slots: int, take: Callable[[Record, int, int], None]) -> None:
        """One round: take up to `free_slots` tasks (waiting up to 0.1 s for the first) and
        hand each to `take(task, partition, offset)`."""
        if not self.membership.may_take_tasks():
            self.membership.consumer.poll(0.1)  # serves the rebalance of leaving
            self._paused = False  # a rejoin starts unpaused
            return
        consumer = self.membership.consumer  # after may_take_tasks: it may have renewed it
        self._offer_handed_over(consumer, take)
        if (free_slots <= 0) != self._paused or self._reassert_pause:
            self._reassert_pause = False
            self._paused = free_slots <= 0
            if self._paused:
                consumer.pause(consumer.assignment())
            else:
                resume_now(consumer, consumer.assignment())
        for msg in consume_available(consumer, max(free_slots, 1), 0.1):
            if msg.error() is not None:
                log.warning("task_consume_error", error=str(msg.error()))
                continue
            try:
                task = codec.decode(msg.value(), msg.headers())
            except codec.DecodeError as exc:
                log.warning("task_undecodable", offset=msg.offset(), error=str(exc))
                self._offsets.skipped(msg.partition(), msg.offset())
                continue
            if not self._accepts(task):
                log.warning("task_of_another_kind", expected=self._kind, value_type=task.value_type,
                            intent=task.intent)
                self._offsets.skipped(msg.partition(), msg.offset())
                continue
            self._offsets.taken(msg.partition(), msg.offset())
            take(task, msg.partition(), msg.offset())
        self.store_offsets()

    def _offer_handed_over(self, consumer: Consumer, take: Callable[[Record, int, int], None]) -> None:
        """Still a member and taking tasks: the tasks handed over meanwhile are ours again,
        those of partitions still assigned (a revoked one's next owner redelivers them)."""
        if not self._handed_over or self.membership.hands_over():
            return
        with self._handed_over_lock:
            held, self._handed_over = self._handed_over, []
        assigned = {tp.partition for tp in consumer.assignment()}
        for task, partition, offset in held:
            if partition in assigned and self._offsets.unsettled(partition, offset):
                log.info("task_taken_back", kind=self._kind, partition=partition, offset=offset)
                take(task, partition, offset)

    def store_offsets(self) -> None:
        """Let auto-commit commit past the tasks whose START was answered, no further."""
        settled = [TopicPartition(self._topic, p, o) for p, o in self._offsets.committable().items()]
        if settled:
            try:
                self.membership.consumer.store_offsets(offsets=settled)
            except KafkaException as exc:  # taken away meanwhile: its next owner redelivers
                log.info("task_offsets_not_stored", error=str(exc))
