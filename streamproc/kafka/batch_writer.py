"""Puts one batch's records into the engine's open transaction, and follows their delivery.

Follow-ups go where they belong (events, commands, `tasks.<queue>`, replies), every staged
state write goes to the changelog, on the partition's own changelog partition (a run's new
history events together, see `kafka/changelog.py`). The highest
changelog offset delivered per partition is what local RocksDB records it reflects. A
record the broker refuses fails the transaction's commit; delivery reports are not needed
for that.
"""

from __future__ import annotations

from confluent_kafka import KafkaException, Producer

from streamproc.export.schema_registry import EventFraming
from streamproc.kafka.changelog import changelog_records
from streamproc.engine.partition import PartitionProcessor
from streamproc.engine.relay import Relay
from streamproc.kafka.admin import TopicAdmin
from streamproc.protocol import codec
from streamproc.protocol.command_batches import pack
from streamproc.protocol.partitioning import partition_for, routing_key_of
from streamproc.protocol.records import Record, ValueType
from streamproc.protocol.topics import Topics

#: How a command is written: relayed (marked as processed), for a partition this engine owns
#: but not relayed (marked with the relay's session), or sent as any command.
_RELAYED, _HELD, _SENT = 0, 1, 2


class BatchWriter:
    def __init__(self, topics: Topics, admin: TopicAdmin, partition_count: int,
                 event_framing: EventFraming = EventFraming()) -> None:
        self.topics = topics
        self._event_framing = event_framing
        self._admin = admin
        self._partition_count = partition_count
        self._task_partitions: dict[str, int] = {}
        self._producer: Producer | None = None
        #: Per partition, the last changelog offset of the batch (delivered by its commit).
        self.changelog_offsets: dict[int, int] = {}
        self._error: Exception | None = None

    def begin(self, producer: Producer) -> None:
        """A new batch, in `producer`'s transaction (just begun)."""
        self._producer = producer
        self.reset()

    def reset(self) -> None:
        self.changelog_offsets.clear()
        self._error = None

    def raise_delivery_error(self) -> None:
        """After the commit: a record the broker refused fails the batch."""
        if self._error is not None:
            raise KafkaException(self._error)

    def write_partition(self, partition: int, processor: PartitionProcessor, relay: Relay | None = None) -> None:
        out = processor.output
        framing = self._event_framing
        for record in out.events:
            self.write(self.topics.events, partition, record, framing.headers, framing.prefix)
        routed = []
        owned, routes = (relay.owned, relay.targets.get(partition, ())) if relay is not None else ((), ())
        for i, record in enumerate(out.commands):
            # A command about a workflow or a schedule goes to its partition (a child's start,
            # a signal to another workflow, a schedule's start, the answer back), like a client's would.
            if i < len(routes):
                target = routes[i]  # the relay routed it already
            else:
                routing = routing_key_of(record.value_type, record.value)
                target = partition if routing is None else partition_for(routing, self._partition_count)
            # Relayed (processed here), for an owned partition but not relayed, or neither:
            # never packed together, as they are written differently (`engine/relay.py`).
            routed.append(((target, _RELAYED if record.relayed else _HELD if target in owned else _SENT), record))
        # Starts for one partition in a row travel as one BATCH command (`command_batches.py`).
        for (target, how), record in pack(routed):
            headers = codec.PROCESSED_HEADERS if how == _RELAYED else \
                relay.sent_through_log(target, record) if how == _HELD else codec.AVRO_HEADERS
            self.write(self.topics.commands, target, record, headers)
        for queue, record in out.tasks:
            # Workflow tasks go by workflow id, so the pages of one task share a partition.
            workflow = record.value_type == ValueType.WORKFLOW
            topic = self._admin.ensure_task_queue(queue, self._partition_count, workflow=workflow)
            partitions = self._task_partitions.get(topic) or self._task_partitions.setdefault(
                topic, self._admin.partitions(topic))
            routing = record.value["workflow_id"] if workflow else str(record.key)
            self.write(topic, partition_for(routing, partitions), record)
        for reply_partition, record in out.replies:
            self.write(self.topics.replies, reply_partition % self._partition_count, record)
        changelog = self.topics.changelog
        records = changelog_records(processor.writes.batch)
        last = len(records) - 1
        for i, (key, value) in enumerate(records):
            # Only the partition's last changelog record reports back: its offset is the one
            # RocksDB records (one partition, one producer: offsets follow produce order).
            self._producer.produce(changelog, value, key, partition=partition,
                                   on_delivery=self._on_changelog_delivery if i == last else None)

    def write(self, topic: str, partition: int, record: Record, headers: list = codec.AVRO_HEADERS,
              prefix: bytes = b"") -> None:
        key = str(record.key).encode() if record.key >= 0 else None
        data = prefix + (record.encoded if record.encoded is not None else codec.encode(record))
        # No delivery callback: a record that cannot be delivered fails commit_transaction
        # (an abortable error), and a Python callback per record cost engine CPU.
        self._producer.produce(topic, data, key, partition=partition, headers=headers)

    # Delivery reports arrive on the thread that commits (inside commit_transaction's flush).
    def _on_changelog_delivery(self, err, msg) -> None:
        if err is not None:
            self._error = err
        else:
            pid = msg.partition()
            if msg.offset() > self.changelog_offsets.get(pid, -1):
                self.changelog_offsets[pid] = msg.offset()
