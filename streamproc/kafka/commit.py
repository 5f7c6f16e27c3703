"""A batch's transaction: written, then committed on a thread of its own, within a deadline.

The exactly-once contract, step by step (the engine's loop, `kafka/engine.py`, drives it):

1. **Process.** Each command of the batch goes to its processor (`engine/partition.py`);
   state writes are staged per command (`state/db.py` PendingWrites), follow-up records
   are collected (`engine/output.py`). The checker's due commands are processed, then the
   commands the batch wrote for partitions this engine owns, on those (`engine/relay.py`).
   Nothing has left the process.
2. **Begin** (`Committer.begin`) on the idle one of two transactional producers.
3. **Produce** the follow-ups (events, commands, task records, replies) and, for every
   staged write, its changelog record (`kafka/batch_writer.py`); due commands the checker
   made and the commands relayed go to the commands topic marked as processed (read back,
   they are skipped: `kafka/echoes.py`).
4. **Seal** the batch's staged writes: the next batch is processed on top of them while
   this one commits.
5. **Add the consumed offsets** to the transaction, fenced by our group generation
   (`send_offsets_to_transaction`), on the commit thread.
6. **Commit** the transaction on the commit thread: outputs, changelog and offsets become
   visible to read_committed readers together, or not at all.
7. **Apply locally** (`Engine._finish_commit`, after `finish()` returned the batch): the
   sealed writes go to RocksDB with the changelog offset they reflect. A crash before this
   step is repaired by restore, which replays the changelog from that offset.

Any failure before 7 aborts and rewinds: the owned partitions are reopened from RocksDB
plus the changelog, and the consumer seeks back to the committed offsets
(`kafka/recovery.py`).

A commit has `timeout_s` (the transaction timeout plus a margin) to finish. One that has
not is abandoned: its thread, its producer and its writer are left behind, a new
producer with the same transactional id is made (its init_transactions fences the old
one: whatever the stuck call does when it returns, it does with a stale epoch), and the
batch counts as failed (`CommitTimedOut`), so the engine rewinds it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

import structlog
from confluent_kafka import KafkaException, Producer, TopicPartition

from streamproc.export.schema_registry import EventFraming
from streamproc.engine.relay import Relay
from streamproc.kafka.batch_writer import BatchWriter
from streamproc.kafka.transactions import CommitThread, TransactionalProducers
from streamproc.kafka.admin import TopicAdmin
from streamproc.kafka.errors import ClientFailure, CommitTimedOut, Origin
from streamproc.protocol import codec
from streamproc.protocol.command_batches import commands_in
from streamproc.protocol.records import Record
from streamproc.protocol.topics import Topics

log = structlog.get_logger("streamproc.engine")


@dataclass
class Committing:
    """A batch whose transaction commits in the background while the next one is processed."""

    future: Future
    #: Partitions (the engine's) whose sealed writes go to RocksDB once it is done.
    touched: list
    messages: int
    due: int
    #: The writer and producer slot of the transaction, and when (monotonic) it counts as failed.
    writer: BatchWriter
    slot: int
    deadline: float
    #: Commands relayed to the engine's own partitions (`engine/relay.py`).
    relayed: int = 0
    #: Seconds the commit thread took (offsets sent, records flushed, committed), once finished.
    commit_seconds: float = 0.0


class Committer:
    def __init__(self, topics: Topics, admin: TopicAdmin, producers: TransactionalProducers,
                 timeout_s: float, event_framing: EventFraming = EventFraming()) -> None:
        self.topics = topics
        self.event_framing = event_framing
        self._admin = admin
        self.producers = producers
        self.timeout_s = timeout_s
        self.writer: BatchWriter | None = None
        self._partition_count = 0
        self._thread = CommitThread()
        self.committing: Committing | None = None
        #: A background commit that failed while a rebalance callback waited for it.
        self.failure: Exception | None = None
        #: The engine's relay (`engine/relay.py`): how commands for owned partitions are written.
        self.relay: Relay | None = None

    def connect(self, partition_count: int) -> None:
        self._partition_count = partition_count
        self.writer = BatchWriter(self.topics, self._admin, partition_count, self.event_framing)

    def begin(self, offsets: dict[int, int], touched: list, due: list[tuple[int, Record]], messages: int,
              group_metadata: Callable[[], object], relayed: int = 0) -> None:
        """Steps 2-4 of the contract here, then 5-6 on the commit thread."""
        writer = self.writer
        try:
            slot, producer = self.producers.begin()
            writer.begin(producer)
            for part in touched:
                writer.write_partition(part.id, part.processor, self.relay)
                part.processor.output.clear()
            for pid, cmd in due:
                writer.write(self.topics.commands, pid, cmd, codec.PROCESSED_HEADERS)
        except KafkaException as exc:
            raise ClientFailure(Origin.PRODUCER, exc) from exc
        for part in touched:
            part.processor.writes.seal()
        group = group_metadata() if offsets else None
        deadline = time.monotonic() + self.timeout_s
        future = self._thread.submit(
            self.commit_transaction, producer, writer,
            [TopicPartition(self.topics.commands, pid, off) for pid, off in offsets.items()], group, deadline)
        due_count = sum(len(commands_in(cmd)) for _, cmd in due)  # a batch's commands, not one
        self.committing = Committing(future, touched, messages, due_count, writer, slot, deadline, relayed)

    def commit_transaction(self, producer: Producer, writer: BatchWriter, offsets: list[TopicPartition],
                           group, deadline: float) -> float:
        """On the commit thread: blocking calls, the GIL released while they wait, each
        bounded by the commit's deadline; returns the seconds they took. The writer is
        passed, not read from `self`: a commit abandoned here must not report into the
        batches after it."""
        started = time.monotonic()
        if offsets:
            producer.send_offsets_to_transaction(offsets, group, _remaining(deadline))
        try:
            producer.commit_transaction(_remaining(deadline))
        except KafkaException as exc:
            if not exc.args[0].retriable() or deadline - time.monotonic() < 0.5:
                raise
            producer.commit_transaction(_remaining(deadline))  # the documented answer to a retriable commit error
        producer.poll(0)
        writer.raise_delivery_error()
        return time.monotonic() - started

    def finish(self) -> Committing | None:
        """Wait for the batch in flight, if any, within its time; returns it once committed.
        A failed commit raises (`ClientFailure`, or `CommitTimedOut` for one abandoned)."""
        failure, self.failure = self.failure, None
        if failure is not None:
            raise failure
        committing, self.committing = self.committing, None
        if committing is None:
            return None
        try:
            committing.commit_seconds = committing.future.result(
                timeout=max(0.0, committing.deadline - time.monotonic())) or 0.0
        except Exception as exc:
            if committing.future.done():
                raise ClientFailure(Origin.PRODUCER, exc) from exc
            self._abandon(committing)
            raise CommitTimedOut(f"a commit did not finish within {self.timeout_s:.0f} s") from None
        return committing

    def settle(self) -> None:
        """After a failure: the commit still running is waited for (within its time) and
        forgotten; whether it landed or not, the rewind reopens the partitions from what
        the changelog holds."""
        committing, self.committing, self.failure = self.committing, None, None
        if committing is not None:
            try:
                committing.future.result(timeout=max(0.0, committing.deadline - time.monotonic()))
            except Exception:  # noqa: BLE001 - its failure is the one being handled, or moot
                if not committing.future.done():
                    self._abandon(committing)

    def _abandon(self, committing: Committing) -> None:
        log.error("commit_abandoned", seconds=round(self.timeout_s, 1), producer=committing.slot)
        self._thread.abandon()
        self.producers.discard(committing.slot)
        # Its delivery reports go to the old writer, which nothing reads any more.
        self.writer = BatchWriter(self.topics, self._admin, self._partition_count, self.event_framing)

    def shutdown(self) -> None:
        self._thread.shutdown()
        self.producers.close()


def _remaining(deadline: float) -> float:
    return max(0.1, deadline - time.monotonic())
