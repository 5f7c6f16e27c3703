"""The Kafka shell around the partition processors: consume, process, commit, recover.

One engine process owns the partitions the `engine` consumer group gives it. Its loop
consumes a batch of commands, runs each partition's processor, and commits everything
in one Kafka transaction (see `_commit`, whose steps are the exactly-once contract).
Only then is local RocksDB written, with the changelog offset it reflects, so a crash
at any point leaves either the old state and old offsets or the new ones.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from streamproc.clock import Clock, SystemClock
from streamproc.due.checker import DueDateChecker, partition_checker
from streamproc.engine.changelog import StaleLocalState, changelog_key, restore
from streamproc.engine.context import Limits
from streamproc.engine.partition import PartitionProcessor
from streamproc.kafka.admin import TopicAdmin
from streamproc.kafka.batching import consume_available
from streamproc.kafka.config import consumer_config, producer_config
from streamproc.protocol import codec
from streamproc.protocol.partitioning import partition_for
from streamproc.protocol.records import Record, ValueType
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
        self._producer: Producer | None = None
        self._delivered: dict[int, int] = {}
        self._delivery_error: Exception | None = None
        self._task_partitions: dict[str, int] = {}
        self._echo_offsets: dict[int, int] = {}
        self._echo_offsets_since = 0.0
        self.on_batch_committed: Callable[[int], None] | None = None

    # lifecycle ----------------------------------------------------------------------------
    def run(self) -> None:
        """Process until `stop()`. A failed transaction is aborted and the owned partitions
        rewound to their last commit; the group membership is kept (see `_recover`)."""
        self.partition_count = self._admin.ensure_engine_topics(self.settings.partitions)
        self._open_producer()
        self._open_consumer()
        try:
            while not self._stop.is_set():
                try:
                    self._step()
                except KafkaException as exc:
                    self._recover(exc)
        finally:
            self._close_session()
            st = self.stats
            log.info("engine_stopped", transactions=st.batches, commands=st.commands,
                     due_commands=st.due_commands, echoes=st.echoes)

    def stop(self) -> None:
        self._stop.set()

    def _open_producer(self) -> None:
        s = self.settings
        self._producer = Producer(producer_config(s.bootstrap, **{
            "transactional.id": f"{s.namespace}.engine.{s.engine_id}",
            "transaction.timeout.ms": self.transaction_timeout_ms,
            "linger.ms": 5,
            "batch.num.messages": 10_000,
            # A transaction begun right after a commit often meets CONCURRENT_TRANSACTIONS
            # while the previous markers are written; librdkafka's default 100 ms retry
            # backoff would then put 100 ms on the next batch (Java uses 20 ms, KAFKA-5477).
            "retry.backoff.ms": 2,
            "retry.backoff.max.ms": 50,
        }))
        # Aborts whatever a previous incarnation with our id left open, and fences it.
        self._producer.init_transactions(60)

    def _open_consumer(self) -> None:
        s = self.settings
        self._consumer = Consumer(consumer_config(s.bootstrap, self.topics.engine_group, **{
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
        error = exc.args[0] if exc.args else None
        fatal = getattr(error, "fatal", lambda: False)()
        log.error("transaction_failed_rewinding", error=str(exc), fatal=fatal,
                  partitions=sorted(self.partitions))
        if not fatal:
            try:
                self._producer.abort_transaction(30)
            except KafkaException as abort_error:
                # _STATE: no transaction was open (the failure came before one began,
                # e.g. while a partition was being opened): nothing to abort.
                if abort_error.args[0].code() != KafkaError._STATE:
                    log.error("transaction_abort_failed", error=str(abort_error))
                    fatal = True
        if fatal:  # e.g. fenced: only a new producer (init_transactions) can go on
            self._producer = None
            self._open_producer()
        self._producer.poll(0)  # the aborted batch's purge reports must not fail the next one
        self._delivery_error = None
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
        if self._consumer is not None:
            try:
                self._consumer.close()  # leaves the group: partitions move at once
            except KafkaException:
                pass
            self._consumer = None
        for pid in list(self.partitions):
            self._close_partition(pid)
        self._producer = None
        self.ready.clear()

    # rebalance ----------------------------------------------------------------------------
    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self._open_partition(tp.partition)
        log.info("partitions_assigned", assigned=sorted(p.partition for p in partitions),
                 owned=sorted(self.partitions))
        self.ready.set()

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
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
        now = self.clock.now_ms()
        waits = [w for p in self.partitions.values() if (w := p.checker.wait_ms(now)) is not None]
        return min([self.idle_poll_ms, *waits]) / 1000

    def _step(self) -> None:
        messages = consume_available(self._consumer, self.max_batch, self._poll_timeout_s())
        now = self.clock.now_ms()
        due = [(p.id, cmd) for p in self.partitions.values()
               if p.checker.wait_ms(now) == 0 for cmd in p.checker.collect(now)]
        commands = []
        for msg in messages:
            if msg.error() is not None:
                log.warning("consume_error", error=str(msg.error()))
            elif msg.partition() in self.partitions:
                commands.append(msg)
        fresh = [msg for msg in commands if not _is_echo(msg)]
        self.stats.echoes += len(commands) - len(fresh)
        if due or fresh:
            self._commit(commands, fresh, due)
        elif commands:
            # Only due commands we wrote (and processed) coming back: a transaction just
            # to move their offsets would hold up the next real command by a commit.
            if not self._echo_offsets:
                self._echo_offsets_since = time.monotonic()
            self._echo_offsets.update((msg.partition(), msg.offset() + 1) for msg in commands)
        elif self._echo_offsets and time.monotonic() - self._echo_offsets_since >= self.echo_offsets_max_age_s:
            self._commit([], [], [])

    def _commit(self, messages: list[Message], fresh: list[Message], due: list[tuple[int, Record]]) -> None:
        """Commit the consumed `messages`, processing `fresh` (those not echoes) and `due`."""
        producer = self._producer
        # 1. Process every command; processors only stage writes and follow-up records.
        #    Due commands are processed now too, in the transaction that writes them to
        #    the log: a timeout costs one commit, not a round trip through Kafka.
        offsets: dict[int, int] = dict(self._echo_offsets)
        touched_ids: set[int] = set()
        for msg in fresh:
            self.partitions[msg.partition()].processor.process(msg.value(), msg.headers(), msg.offset())
            touched_ids.add(msg.partition())
        for msg in messages:
            offsets[msg.partition()] = msg.offset() + 1
        for pid, cmd in due:
            cmd.encoded = codec.encode(cmd)
            self.partitions[pid].processor.process(cmd.encoded, codec.PROCESSED_HEADERS, -1)
            touched_ids.add(pid)
        touched = [self.partitions[pid] for pid in touched_ids]
        # 2. Produce follow-ups, the changelog of every staged write, and the due commands.
        producer.begin_transaction()
        self._delivered.clear()
        self._delivery_error = None
        for part in touched:
            self._produce_output(part)
        for pid, cmd in due:
            self._produce(self.topics.commands, pid, cmd, codec.PROCESSED_HEADERS)
        # 3. The consumed offsets join the transaction (fenced by our group generation).
        if offsets:
            producer.send_offsets_to_transaction(
                [TopicPartition(self.topics.commands, pid, off) for pid, off in offsets.items()],
                self._consumer.consumer_group_metadata(), 30)
        # 4. Commit: outputs, changelog and offsets become visible together or not at all.
        try:
            producer.commit_transaction(30)
        except KafkaException as exc:
            if not exc.args[0].retriable():
                raise
            producer.commit_transaction(30)  # the documented answer to a retriable commit error
        producer.poll(0)
        if self._delivery_error is not None:
            raise KafkaException(self._delivery_error)
        self._echo_offsets.clear()
        # 5. Only now write local state, with the changelog offset it reflects.
        now = self.clock.now_ms()
        for part in touched:
            part.changelog_offset = self._delivered.get(part.id, part.changelog_offset)
            part.db.apply(part.processor.writes.batch,
                          {"changelog_offset": part.changelog_offset, "written_at_ms": now})
            part.processor.reset_batch()
            part.checker.refresh()
        self.stats.batches += 1
        self.stats.commands += len(messages)
        self.stats.due_commands += len(due)
        if self.on_batch_committed is not None:
            self.on_batch_committed(len(messages))

    def _produce_output(self, part: _Partition) -> None:
        out = part.processor.output
        for record in out.events:
            self._produce(self.topics.events, part.id, record)
        for record in out.commands:
            self._produce(self.topics.commands, part.id, record)
        for queue, record in out.tasks:
            # Workflow tasks go by workflow id, so the pages of one task share a partition.
            workflow = record.value_type == ValueType.WORKFLOW
            topic = self._admin.ensure_task_queue(queue, self.partition_count, workflow=workflow)
            partitions = self._task_partitions.get(topic) or self._task_partitions.setdefault(
                topic, self._admin.partitions(topic))
            routing = record.value["workflow_id"] if workflow else str(record.key)
            self._produce(topic, partition_for(routing, partitions), record)
        for reply_partition, record in out.replies:
            self._produce(self.topics.replies, reply_partition % self.partition_count, record)
        changelog = self.topics.changelog
        for (family, key), value in part.processor.writes.batch.items():
            self._producer.produce(changelog, value, changelog_key(family, key), partition=part.id,
                                   on_delivery=self._on_changelog_delivery)

    def _produce(self, topic: str, partition: int, record: Record,
                 headers: list = codec.AVRO_HEADERS) -> None:
        key = str(record.key).encode() if record.key >= 0 else None
        data = record.encoded if record.encoded is not None else codec.encode(record)
        self._producer.produce(topic, data, key, partition=partition,
                               headers=headers, on_delivery=self._on_delivery)

    def _on_delivery(self, err, msg) -> None:
        if err is not None:
            self._delivery_error = err

    def _on_changelog_delivery(self, err, msg) -> None:
        if err is not None:
            self._delivery_error = err
        else:
            pid = msg.partition()
            if msg.offset() > self._delivered.get(pid, -1):
                self._delivered[pid] = msg.offset()


def _is_echo(msg: Message) -> bool:
    """A command the engine wrote and processed in the same transaction (a due command)."""
    return codec.header(msg.headers(), codec.PROCESSED_HEADER) is not None
