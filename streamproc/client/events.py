"""Read the engine's events topic as a plain read_committed consumer would."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaException, TopicPartition

from streamproc.closing import ClosesOnExit
from streamproc.kafka.batching import consume_available
from streamproc.kafka.config import consumer_config
from streamproc.protocol import codec
from streamproc.protocol.records import Record
from streamproc.protocol.topics import Topics


class EventReader(ClosesOnExit):
    """Iterates events and rejections from the beginning (or the end) of the events topic.

    Every partition is assigned to the reader, none subscribed: it is in no group, so it
    needs no group coordinator. After a broker fenced by its own controller during a stall,
    a reader in a group was seen never to reach its coordinator again (see
    `streamproc.kafka.group_standing`) and read nothing, without an error, for minutes.
    It commits nothing; the group id only satisfies the client."""

    def __init__(self, bootstrap: str, namespace: str = "streamproc", from_beginning: bool = True,
                 group: str | None = None) -> None:
        self.topics = Topics(namespace)
        self._start_offset = OFFSET_BEGINNING if from_beginning else OFFSET_END
        self._consumer = Consumer(consumer_config(bootstrap, group or f"{namespace}.reader.{uuid.uuid4().hex}", **{
            "auto.offset.reset": "earliest" if from_beginning else "latest",
        }))
        self._assigned = False

    def _assign(self, timeout: float) -> bool:
        """Assign every partition of the events topic, once it exists; False until then."""
        if not self._assigned:
            topic = self.topics.events
            try:
                metadata = self._consumer.list_topics(topic, timeout=max(timeout, 0.1)).topics.get(topic)
            except KafkaException:  # no broker answered in time
                return False
            if metadata is None or metadata.error is not None or not metadata.partitions:
                return False
            self._consumer.assign([TopicPartition(topic, p, self._start_offset) for p in sorted(metadata.partitions)])
            self._assigned = True
        return True

    def poll(self, timeout: float = 0.2, max_records: int = 5000) -> list[tuple[Record, int, int]]:
        """Decoded records with (partition, offset), in order per partition."""
        if not self._assign(timeout):
            time.sleep(timeout)  # the topic is not there yet: as long as a poll would wait
            return []
        out = []
        for msg in consume_available(self._consumer, max_records, timeout):
            if msg.error() is None:
                out.append((codec.decode(msg.value(), msg.headers()), msg.partition(), msg.offset()))
        return out

    def records(self, timeout: float) -> Iterator[Record]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for record, _, _ in self.poll():
                yield record

    def wait_for(self, predicate: Callable[[Record], bool], timeout: float = 30) -> Record:
        for record in self.records(timeout):
            if predicate(record):
                return record
        raise TimeoutError(f"no matching event within {timeout} s")

    def close(self) -> None:
        self._consumer.close()
