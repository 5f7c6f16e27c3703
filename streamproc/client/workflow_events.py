"""Read a workflow's history events from the events topic, as a client waiting for a result.

Every history event the engine appends is also a WORKFLOW record on `<ns>.events`, in
the partition of the workflow id (docs/workflow-protocol.md). A client reads only that
partition, from about when it started the run (or from the beginning for a handle on a
run started elsewhere), and keeps the records of its workflow id.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Iterator
from typing import Any

import orjson
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from streamproc.closing import ClosesOnExit
from streamproc.kafka.batching import close_in_background, consume_available, messages_to_the_end
from streamproc.kafka.client_log import ClientLog
from streamproc.kafka.config import consumer_config
from streamproc.protocol import codec
from streamproc.protocol.records import Record, RecordType, ValueType

__all__ = ["WorkflowEvent", "CLOSE_EVENTS", "workflow_event", "WorkflowEventScanner"]

#: Event types that end a run.
CLOSE_EVENTS = frozenset({
    "WORKFLOW_EXECUTION_COMPLETED", "WORKFLOW_EXECUTION_FAILED", "WORKFLOW_EXECUTION_TIMED_OUT",
    "WORKFLOW_EXECUTION_CANCELED", "WORKFLOW_EXECUTION_TERMINATED", "WORKFLOW_EXECUTION_CONTINUED_AS_NEW"})
#: How far before the start's answer to begin reading: the events of the run's start
#: were committed in the same transaction, at about that time.
LOOKBACK_MS = 60_000


@dataclasses.dataclass(frozen=True, slots=True)
class WorkflowEvent:
    """One history event of one run, as read from the events topic."""

    workflow_id: str
    run_id: str
    event_id: int
    event_type: str
    event_time_ms: int
    attributes: dict[str, Any]

    @property
    def is_close(self) -> bool:
        return self.event_type in CLOSE_EVENTS

    def as_history_event(self) -> dict[str, Any]:
        """The JSON object of docs/workflow-protocol.md."""
        return {"event_id": self.event_id, "event_type": self.event_type,
                "event_time_ms": self.event_time_ms, "attributes": self.attributes}


def workflow_event(record: Record) -> WorkflowEvent | None:
    """The history event a record of the events topic carries, or None if it is another record."""
    if record.record_type is not RecordType.EVENT or record.value_type != ValueType.WORKFLOW:
        return None
    v = record.value
    attributes = orjson.loads(v["attributes"]) if v.get("attributes") else {}
    return WorkflowEvent(v["workflow_id"], v["run_id"], v["event_id"], record.intent,
                         v["event_time_ms"], attributes)


class WorkflowEventScanner(ClosesOnExit):
    """Reads history events of one events partition, filtered by workflow id."""

    def __init__(self, bootstrap: str, topic: str, partition: int, *, since_ms: int | None = None,
                 group_prefix: str = "streamproc") -> None:
        self.topic, self.partition = topic, partition
        # No group membership and no commits: the group id only satisfies the client. Once
        # assigned, it reads on across a broker restart; its lines are logged once per interval.
        self._consumer = Consumer(consumer_config(bootstrap, f"{group_prefix}.workflow-events.{uuid.uuid4().hex}",
                                                  **ClientLog("workflow-events", interval_s=10).config()))
        start = TopicPartition(topic, partition, OFFSET_BEGINNING)
        if since_ms is not None:
            start = self._offset_at(TopicPartition(topic, partition, max(0, since_ms - LOOKBACK_MS))) or start
        self._start = start
        self._consumer.assign([start])

    def _offset_at(self, at: TopicPartition, timeout: float = 30) -> TopicPartition | None:
        """The first offset at or after `at`'s time, asking for up to `timeout` seconds (the
        broker may be restarting); None if there is none, or no broker answered: then the
        scanner reads from the beginning, slower but complete."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                (found,) = self._consumer.offsets_for_times([at], max(deadline - time.monotonic(), 0.1))
                return found if found.offset >= 0 else None
            except KafkaException:
                if time.monotonic() >= deadline:
                    return None
                time.sleep(0.5)

    def rewind(self) -> None:
        """Read again from where this scanner started."""
        self._consumer.assign([TopicPartition(self.topic, self.partition, self._start.offset)])

    def events(self, workflow_id: str | None, timeout: float | None) -> Iterator[WorkflowEvent]:
        """Events of `workflow_id` (every workflow's if None) as they are read; stops
        with TimeoutError after `timeout` seconds (never when None)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while deadline is None or time.monotonic() < deadline:
            yield from self._read(workflow_id)
        raise TimeoutError(f"no further event of workflow {workflow_id!r} within {timeout} s")

    def existing(self, workflow_id: str | None, timeout: float = 30) -> list[WorkflowEvent]:
        """Every event of `workflow_id` committed so far (up to the partition's end now)."""
        out: list[WorkflowEvent] = []
        for msg in messages_to_the_end(self._consumer, self.topic, self.partition, timeout):
            event = self._event(msg, workflow_id)
            if event is not None:
                out.append(event)
        return out

    def _read(self, workflow_id: str | None) -> list[WorkflowEvent]:
        out = []
        for msg in consume_available(self._consumer, 500, 0.2):
            if msg.error() is None and (event := self._event(msg, workflow_id)) is not None:
                out.append(event)
        return out

    @staticmethod
    def _event(msg, workflow_id: str | None) -> WorkflowEvent | None:
        """The message's workflow event, if it is one of `workflow_id` (any, when None)."""
        try:
            event = workflow_event(codec.decode(msg.value(), msg.headers()))
        except (codec.DecodeError, ValueError, KeyError):
            return None  # not ours to judge: the events topic is read by many
        if event is not None and (workflow_id is None or event.workflow_id == workflow_id):
            return event
        return None

    def close(self) -> None:
        close_in_background(self._consumer).join(10)  # bounded: the broker may be away
