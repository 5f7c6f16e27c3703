"""The Kafka shell around the partition processors: consume, process, commit, recover.

One engine process owns the partitions the `engine` consumer group gives it. Its loop
consumes a batch of commands, runs each partition's processor, and commits everything
in one Kafka transaction (see `_begin_commit`, whose steps are the exactly-once
contract). Only then is local RocksDB written, with the changelog offset it reflects, so
a crash at any point leaves either the old state and old offsets or the new ones. The
commit runs on a background thread while the loop processes the next batch over the
committing one's writes; the next transaction begins once the previous one is done.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field

import structlog
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Message, Producer, TopicPartition

from streamproc.clock import Clock, SystemClock
from streamproc.due.checker import DueDateChecker, partition_checker
from streamproc.engine.batch_writer import BatchWriter
from streamproc.engine.changelog import StaleLocalState, restore
from streamproc.engine.context import Limits
from streamproc.engine.partition import PartitionProcessor
from streamproc.engine.transactions import TransactionalProducers
from streamproc.kafka.admin import TopicAdmin
from streamproc.kafka.batching import consume_available
from streamproc.kafka.config import client_id, consumer_config, producer_config
from streamproc.protocol import codec
from streamproc.protocol.records import Record
from streamproc.protocol.topics import Topics
from streamproc.settings import Settings
from streamproc.state.db import PartitionDb

log = structlog.get_logger("streamproc.engine")


@dataclass
class _Partition:
    """What the engine holds for one partition it owns."""

    id: int
    db: PartitionDb
    processor: PartitionProcessor
    checker: DueDateChecker
    changelog_offset: int = -1


@dataclass
class _Committing:
    """A batch whose transaction commits in the background while the next one is processed."""

    future: Future
    #: Partitions whose sealed writes (`PendingWrites.committing`) go to RocksDB once it is done.
    touched: list[_Partition]
    messages: int
    due: int


@dataclass
class EngineStats:
    #: Committed transactions.
    batches: int = 0
    commands: int = 0
    due_commands: int = 0
    #: Due commands read back from the log (skipped: processed when they were written).
    echoes: int = 0
    restored_records: int = 0
    restore_seconds: list[float] = field(default_factory=list)


class Engine:
    def __init__(self, settings: Settings, clock: Clock | None = None, limits: Limits = Limits(),
                 max_batch: int = 2000, idle_poll_ms: int = 100,
                 transaction_timeout_ms: int = 10_000, echo_offsets_max_age_s: float = 1.0) -> None:
        self.settings = settings
        self.topics = Topics(settings.namespace)
        self.clock = clock or SystemClock()
        self.limits = limits
        self.max_batch = max_batch
        self.idle_poll_ms = idle_poll_ms
        self.transaction_timeout_ms = transaction_timeout_ms
        #: Offsets of our own due commands read back from the log ride with the next
        #: transaction; when none comes, they are committed after this long (read again
        #: after a crash, they are skipped anyway).
        self.echo_offsets_max_age_s = echo_offsets_max_age_s
        self.stats = EngineStats()
        self.partitions: dict[int, _Partition] = {}
        self.ready = threading.Event()
        self._stop = threading.Event()
        self._admin = TopicAdmin(settings.bootstrap, self.topics)
        self._state_root = settings.state_dir / settings.engine_id
        self._consumer: Consumer | None = None
        self._producers = TransactionalProducers(
            f"{settings.namespace}.engine.{settings.engine_id}", self._producer_config)
        self._writer: BatchWriter | None = None
        self._echo_offsets: dict[int, int] = {}
        self._echo_offsets_since = 0.0
        self._committer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engine-commit")
        self._committing: _Committing | None = None
        #: A background commit that failed while a rebalance callback waited for it.
        self._commit_failure: KafkaException | None = None
        self.on_batch_committed: Callable[[int], None] | None = None

    # lifecycle ----------------------------------------------------------------------------
    def run(self) -> None:
        """Process until `stop()`. A failed transaction is aborted and the owned partitions
        rewound to their last commit; the group membership is kept (see `_recover`)."""
        self.partition_count = self._admin.ensure_engine_topics(self.settings.partitions)
        self._writer = BatchWriter(self.topics, self._admin, self.partition_count)
        self._producers.open()
        self._open_consumer()
        try:
            while not self._stop.is_set():
                try:
                    self._step()
                except KafkaException as exc:
                    self._recover(exc)
        finally:
            self._close_session()
            self._committer.shutdown(wait=True)
            st = self.stats
            log.info("engine_stopped", transactions=st.batches, commands=st.commands,
                     due_commands=st.due_commands, echoes=st.echoes)

    def stop(self) -> None:
        self._stop.set()

    def _producer_config(self, transactional_id: str) -> dict:
        return producer_config(self.settings.bootstrap, **{
            "client.id": client_id("engine", self.settings.engine_id),
            "transactional.id": transactional_id,
            "transaction.timeout.ms": self.transaction_timeout_ms,
            "linger.ms": 5,
            "batch.num.messages": 10_000,
            # A transaction begun right after a commit often meets CONCURRENT_TRANSACTIONS
            # while the previous markers are written; librdkafka's default 100 ms retry
            # backoff would then put 100 ms on the next batch (Java uses 20 ms, KAFKA-5477).
            "retry.backoff.ms": 2,
            "retry.backoff.max.ms": 50,
        })

    def _open_consumer(self) -> None:
        s = self.settings
        self._consumer = Consumer(consumer_config(s.bootstrap, self.topics.engine_group, **{
            "client.id": client_id("engine", s.engine_id),
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000,
            "max.poll.interval.ms": 600_000,
            # Static membership: a restarted engine gets its partitions back at once,
            # without waiting for the session timeout or moving other partitions.
            "group.instance.id": s.engine_id,
        }))
        self._consumer.subscribe([self.topics.commands], on_assign=self._on_assign,
                                 on_revoke=self._on_revoke, on_lost=self._on_revoke)

    def _recover(self, exc: KafkaException) -> None:
        """Undo a failed batch: abort it, reopen the owned partitions from their committed
        local state, and seek to the committed offsets.

        The consumer is kept on purpose. A rebalance makes the offsets' group generation
        stale (ILLEGAL_GENERATION), and that is the common cause here; a new consumer with
        our static instance id would rejoin without a rebalance, so the partitions this one
        was giving up mid-rebalance would stay unassigned.
        """
        # A commit still running is waited for and forgotten: whether it landed or not,
        # the partitions are reopened below from what the changelog holds.
        committing, self._committing, self._commit_failure = self._committing, None, None
        if committing is not None:
            wait_futures([committing.future])
        error = exc.args[0] if exc.args else None
        fatal = getattr(error, "fatal", lambda: False)()
        log.error("transaction_failed_rewinding", error=str(exc), fatal=fatal,
                  partitions=sorted(self.partitions))
        self._producers.abort(fatal)
        self._writer.reset()
        # What the group assigned us, not only what we opened: an assignment whose opening
        # failed half way (the broker was still electing a changelog leader, say) is
        # finished here, or the unopened partitions would never be processed.
        owned = sorted({*self.partitions, *(tp.partition for tp in self._consumer.assignment())})
        for pid in owned:
            self._close_partition(pid)
            self._open_partition(pid)
        if owned and not self.ready.is_set():
            log.info("partitions_assigned", assigned=owned, owned=owned)
            self.ready.set()
        if owned:
            tps = [TopicPartition(self.topics.commands, pid) for pid in owned]
            for tp in self._consumer.committed(tps, 30):
                self._consumer.seek(TopicPartition(
                    tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))

    def _close_session(self) -> None:
        try:
            self._finish_commit()
        except KafkaException as exc:  # nothing more to do: the next owner restores from the log
            log.warning("last_commit_failed", error=str(exc))
        if self._consumer is not None:
            try:
                self._consumer.close()  # leaves the group: partitions move at once
            except KafkaException:
                pass
            self._consumer = None
        for pid in list(self.partitions):
            self._close_partition(pid)
        self._producers.close()
        self.ready.clear()

    # rebalance ----------------------------------------------------------------------------
    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self._open_partition(tp.partition)
        log.info("partitions_assigned", assigned=sorted(p.partition for p in partitions),
                 owned=sorted(self.partitions))
        self.ready.set()

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        try:  # the commit in flight may hold these partitions' writes
            self._finish_commit()
        except KafkaException as exc:
            self._commit_failure = exc  # raised from the loop, which rewinds
        for tp in partitions:
            self._close_partition(tp.partition)
        log.info("partitions_revoked", revoked=sorted(p.partition for p in partitions),
                 owned=sorted(self.partitions))

    def _open_partition(self, pid: int) -> None:
        path = self._state_root / f"partition-{pid}"
        started = time.monotonic()
        db = PartitionDb(path, pid)
        try:
            applied = restore(db, self.settings.bootstrap, self.topics.changelog, pid, self.clock.now_ms())
        except StaleLocalState as exc:
            log.warning("local_state_stale_rebuilding", partition=pid, reason=str(exc))
            db.close()
            PartitionDb.destroy(path)
            db = PartitionDb(path, pid)
            applied = restore(db, self.settings.bootstrap, self.topics.changelog, pid, self.clock.now_ms())
        seconds = time.monotonic() - started
        self.stats.restored_records += applied
        self.stats.restore_seconds.append(seconds)
        processor = PartitionProcessor(pid, db, self.clock, self.limits)
        checker = partition_checker(db)
        processor.on_processed = checker.processed
        self.partitions[pid] = _Partition(pid, db, processor, checker, db.checkpoint()["changelog_offset"])
        log.info("partition_restored", partition=pid, records=applied, seconds=round(seconds, 3))

    def _close_partition(self, pid: int) -> None:
        part = self.partitions.pop(pid, None)
        self._echo_offsets.pop(pid, None)  # not ours to commit any more; re-read, they are skipped
        if part is not None:
            part.db.close()

    # processing ---------------------------------------------------------------------------
    def _poll_timeout_s(self) -> float:
        if self._committing is not None:
            return 0  # take what has arrived and process it while the commit runs
        now = self.clock.now_ms()
        waits = [w for p in self.partitions.values() if (w := p.checker.wait_ms(now)) is not None]
        return min([self.idle_poll_ms, *waits]) / 1000

    def _step(self) -> None:
        """Process a batch while the previous one commits, then commit it (see `_begin_commit`)."""
        messages = consume_available(self._consumer, self.max_batch, self._poll_timeout_s())
        commands = []
        for msg in messages:
            if msg.error() is not None:
                log.warning("consume_error", error=str(msg.error()))
            elif msg.partition() in self.partitions:
                commands.append(msg)
        fresh = [msg for msg in commands if not _is_echo(msg)]
        self.stats.echoes += len(commands) - len(fresh)
        # 1. Processors only stage writes (over the committing batch's) and follow-ups.
        touched: set[int] = set()
        for msg in fresh:
            self.partitions[msg.partition()].processor.process(msg.value(), msg.headers(), msg.offset())
            touched.add(msg.partition())
        # 2. The previous batch must have committed before this one's transaction begins.
        self._finish_commit()
        # 3. Due commands, from committed state, are processed in the transaction that
        #    writes them to the log: a timeout costs one commit, not a round trip.
        now = self.clock.now_ms()
        due = [(p.id, cmd) for p in self.partitions.values()
               if p.checker.wait_ms(now) == 0 for cmd in p.checker.collect(now)]
        for pid, cmd in due:
            cmd.encoded = codec.encode(cmd)  # for the log; a command that cannot be encoded fails here
            self.partitions[pid].processor.process_command(cmd, -1)
            touched.add(pid)
        if due or fresh:
            self._begin_commit(commands, touched, due)
        elif commands:
            # Only due commands we wrote (and processed) coming back: a transaction just
            # to move their offsets would hold up the next real command by a commit.
            if not self._echo_offsets:
                self._echo_offsets_since = time.monotonic()
            self._echo_offsets.update((msg.partition(), msg.offset() + 1) for msg in commands)
        elif self._echo_offsets and time.monotonic() - self._echo_offsets_since >= self.echo_offsets_max_age_s:
            self._begin_commit([], set(), [])

    def _begin_commit(self, messages: list[Message], touched_ids: set[int],
                      due: list[tuple[int, Record]]) -> None:
        """Write the batch in a transaction and start committing it in the background.

        The exactly-once contract, in order: follow-ups, the changelog of every staged
        write, the due commands and the consumed offsets (fenced by our group generation)
        go into one transaction, visible together or not at all; local RocksDB is written
        only once it committed (`_finish_commit`), with the changelog offset it reflects.
        """
        offsets = dict(self._echo_offsets)
        self._echo_offsets.clear()  # read again after a failure, echoes are skipped anyway
        for msg in messages:
            offsets[msg.partition()] = msg.offset() + 1
        touched = [self.partitions[pid] for pid in touched_ids]
        writer = self._writer
        producer = self._producers.begin()
        writer.begin(producer)
        for part in touched:
            writer.write_partition(part.id, part.processor)
            part.processor.output.clear()
        for pid, cmd in due:
            writer.write(self.topics.commands, pid, cmd, codec.PROCESSED_HEADERS)
        for part in touched:
            part.processor.writes.seal()
        group = self._consumer.consumer_group_metadata() if offsets else None
        future = self._committer.submit(
            self._commit_transaction, producer,
            [TopicPartition(self.topics.commands, pid, off) for pid, off in offsets.items()], group)
        self._committing = _Committing(future, touched, len(messages), len(due))

    def _commit_transaction(self, producer: Producer, offsets: list[TopicPartition], group) -> None:
        """On the commit thread: blocking calls, the GIL released while they wait."""
        if offsets:
            producer.send_offsets_to_transaction(offsets, group, 30)
        try:
            producer.commit_transaction(30)
        except KafkaException as exc:
            if not exc.args[0].retriable():
                raise
            producer.commit_transaction(30)  # the documented answer to a retriable commit error
        producer.poll(0)
        self._writer.raise_delivery_error()

    def _finish_commit(self) -> None:
        """Wait for the batch in flight, if any; write it to RocksDB once committed."""
        failure, self._commit_failure = self._commit_failure, None
        if failure is not None:
            raise failure
        committing, self._committing = self._committing, None
        if committing is None:
            return
        committing.future.result()  # a failed commit raises here; the loop rewinds
        now = self.clock.now_ms()
        for part in committing.touched:
            part.changelog_offset = self._writer.changelog_offsets.get(part.id, part.changelog_offset)
            part.db.apply(part.processor.writes.committing,
                          {"changelog_offset": part.changelog_offset, "written_at_ms": now})
            part.processor.writes.committed()
            part.checker.refresh()
        self.stats.batches += 1
        self.stats.commands += committing.messages
        self.stats.due_commands += committing.due
        if self.on_batch_committed is not None:
            self.on_batch_committed(committing.messages)


def _is_echo(msg: Message) -> bool:
    """A command the engine wrote and processed in the same transaction (a due command)."""
    return codec.header(msg.headers(), codec.PROCESSED_HEADER) is not None
