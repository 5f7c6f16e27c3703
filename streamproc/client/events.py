"""Read the engine's events topic as a plain read_committed consumer would."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator

from confluent_kafka import Consumer

from streamproc.closing import ClosesOnExit
from streamproc.kafka.batching import consume_available
from streamproc.kafka.config import consumer_config
from streamproc.protocol import codec
from streamproc.protocol.records import Record
from streamproc.protocol.topics import Topics


class EventReader(ClosesOnExit):
    """Iterates events and rejections from the beginning (or the end) of the events topic."""

    def __init__(self, bootstrap: str, namespace: str = "streamproc", from_beginning: bool = True,
                 group: str | None = None) -> None:
        self.topics = Topics(namespace)
        self._consumer = Consumer(consumer_config(bootstrap, group or f"{namespace}.reader.{uuid.uuid4().hex}", **{
            "auto.offset.reset": "earliest" if from_beginning else "latest",
            "partition.assignment.strategy": "range",
        }))
        self._consumer.subscribe([self.topics.events])

    def poll(self, timeout: float = 0.2, max_records: int = 5000) -> list[tuple[Record, int, int]]:
        """Decoded records with (partition, offset), in order per partition."""
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
