"""The changelog: state writes mirrored to a compacted topic (indexes derived from them aside), and recovery from it.

A changelog record's key is the column family id byte followed by the state key; its
value is the state value, or a tombstone for a delete. The topic has as many partitions
as the commands topic and partition p holds the state of partition p.

One exception: the history events a batch appends to a run travel as one record
(`HISTORY_EVENTS`), keyed by the run and its first new event, its value the events one
after the other (`changelog_records`); restore spreads it back into one history write
per event (`changelog_writes`). Events are written once and never deleted, so such a
record is never replaced nor tombstoned, as the per-event records were not: compaction
keeps what it kept before. A changelog written one record per event (by an engine from
before) restores as it always did; an engine from before cannot restore this layout.

Another: the due-date indexes of runs and jobs (`workflow_deadlines`, `job_deadlines`,
`job_backoff`) are not on the changelog; a restore rebuilds them from the run and job
documents it applies (`state/derived_index.py`).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator

import structlog
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from streamproc.kafka.batching import consume_available
from streamproc.kafka.config import consumer_config
from streamproc.state.db import PartitionDb, Write
from streamproc.state.derived_index import DERIVED_FAMILIES, DOCUMENT_FAMILIES, index_writes
from streamproc.state.families import Family

log = structlog.get_logger("streamproc.engine")

#: Local state older than this may miss tombstones the broker already dropped
#: (delete.retention.ms is one day): such a copy is rebuilt from the changelog.
MAX_CHECKPOINT_AGE_MS = 12 * 3600 * 1000
_RESTORE_CHUNK = 10_000


#: The id of a record holding a batch's new events of one run (ids from 128 up are
#: kinds of record, never families).
HISTORY_EVENTS = 0x80
#: A history record grows to about this size, then the next event starts another: far
#: below the broker's message size limit (an event alone may be larger, as before).
MAX_HISTORY_RECORD_BYTES = 256 * 1024
#: Before each event in a history record: its id (the rest of its history key) and length.
_EVENT_HEADER = struct.Struct(">QI")
_RUN_KEY_BYTES = 8  # a history key is (run key, event id), 8 bytes each
#: Looked up once (a member's lookup on its enum class is a Python call per use).
_HISTORY = Family.WORKFLOW_HISTORY


def changelog_key(family: Family, key: bytes) -> bytes:
    return bytes((family,)) + key


def parse_changelog_key(data: bytes) -> Write:
    return Family(data[0]), data[1:]


def changelog_records(writes: dict[Write, bytes | None]) -> list[tuple[bytes, bytes | None]]:
    """The changelog records (key, value) of a batch's writes: one per write, but a run's
    new history events together, one record per run (split past MAX_HISTORY_RECORD_BYTES),
    and none for the derived indexes (`state/derived_index.py`)."""
    records: list[tuple[bytes, bytes | None]] = []
    runs: dict[bytes, list[tuple[bytes, bytes]]] = {}
    for (family, key), value in writes.items():
        if family == _HISTORY and value is not None:
            runs.setdefault(key[:_RUN_KEY_BYTES], []).append((key, value))
        elif family not in DERIVED_FAMILIES:
            records.append((bytes((family,)) + key, value))
    for events in runs.values():
        records.extend(_history_records(events))
    return records


def _history_records(events: list[tuple[bytes, bytes]]) -> Iterator[tuple[bytes, bytes]]:
    first, parts, size = None, [], 0
    for key, value in events:
        if first is not None and size + len(value) > MAX_HISTORY_RECORD_BYTES:
            yield bytes((HISTORY_EVENTS,)) + first, b"".join(parts)
            first, parts, size = None, [], 0
        if first is None:
            first = key
        parts.append(_EVENT_HEADER.pack(int.from_bytes(key[_RUN_KEY_BYTES:], "big"), len(value)))
        parts.append(value)
        size += _EVENT_HEADER.size + len(value)
    if first is not None:
        yield bytes((HISTORY_EVENTS,)) + first, b"".join(parts)


def changelog_writes(key: bytes, value: bytes | None) -> Iterator[tuple[Write, bytes | None]]:
    """The state writes a changelog record stands for (either layout)."""
    if key[0] != HISTORY_EVENTS:
        yield parse_changelog_key(key), value
        return
    run, at = key[1:1 + _RUN_KEY_BYTES], 0
    while at < len(value):
        event_id, size = _EVENT_HEADER.unpack_from(value, at)
        at += _EVENT_HEADER.size
        yield (Family.WORKFLOW_HISTORY, run + event_id.to_bytes(8, "big")), value[at:at + size]
        at += size


def restore_write(db: PartitionDb, writes: dict[Write, bytes | None], write: Write, value: bytes | None) -> None:
    """Add a changelog record's `write` to a restore's `writes` (not applied to `db` yet),
    with the derived indexes' writes that go with it; the derived families' own records
    (from an engine from before) are left out: the documents say the same."""
    family, key = write
    if family in DERIVED_FAMILIES:
        return
    if family in DOCUMENT_FAMILIES:
        previous = writes[write] if write in writes else db.get(family, key)
        for index_write, index_value in index_writes(family, key, value, previous):
            writes[index_write] = index_value
    writes[write] = value


class StaleLocalState(Exception):
    """The local copy cannot be brought up to date from the changelog: rebuild it."""


def restore(db: PartitionDb, bootstrap: str, topic: str, partition: int, now_ms: int,
            timeout_s: float = 300, connect_timeout_s: float = 60) -> int:
    """Bring `db` up to the end of its changelog partition; returns the records applied.

    Reads with read_committed from the offset after the local checkpoint (or from the
    start for an empty copy) to the last stable offset, so it applies exactly the writes
    of committed transactions: those of a batch whose local write was lost in a crash
    after its commit, and those another engine made while it owned the partition.
    Bounded: `connect_timeout_s` for the broker's first answer (the partition's offsets),
    `timeout_s` for reading to the end; past them it raises (the engine rewinds and tries
    again).
    """
    checkpoint = db.checkpoint()
    start = checkpoint["changelog_offset"] + 1
    consumer = Consumer(consumer_config(bootstrap, group=None, **{
        "group.id": f"{topic}.restore", "enable.partition.eof": True,
        "fetch.wait.max.ms": 10, "queued.max.messages.kbytes": 262144,
    }))
    try:
        tp = TopicPartition(topic, partition)
        low, high = _watermarks(consumer, tp, connect_timeout_s)
        if start > 0 and (start > high or start < low
                          or now_ms - checkpoint.get("written_at_ms", 0) > MAX_CHECKPOINT_AGE_MS):
            raise StaleLocalState(f"local checkpoint {start - 1} vs changelog [{low}, {high})")
        if start > 0 and not db.of_current_layout():
            raise StaleLocalState(f"local copy of layout {checkpoint.get('layout', 1)}, written by an engine "
                                  f"from before: its derived indexes are rebuilt with it")
        if start >= high:
            return 0
        consumer.assign([TopicPartition(topic, partition, start)])
        return _apply_until_end(consumer, db, high, now_ms, timeout_s)
    finally:
        consumer.close()


#: Answers of a broker whose partition leadership is still settling (new topics, a
#: restarted broker): asking again shortly succeeds.
_TRANSIENT = {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
              KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._TIMED_OUT, KafkaError._TRANSPORT}


def _watermarks(consumer: Consumer, tp: TopicPartition, timeout_s: float = 60) -> tuple[int, int]:
    deadline = time.monotonic() + timeout_s
    pause = 0.05
    while True:
        try:
            return consumer.get_watermark_offsets(tp, timeout=max(0.1, min(30.0, deadline - time.monotonic())))
        except KafkaException as exc:
            if exc.args[0].code() not in _TRANSIENT or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(1.0, pause * 2)


def _apply_until_end(consumer: Consumer, db: PartitionDb, high: int, now_ms: int,
                     timeout_s: float) -> int:
    applied = 0
    last_offset = -1
    deadline = time.monotonic() + timeout_s
    done = False
    while not done:
        if time.monotonic() > deadline:
            raise TimeoutError(f"changelog restore did not reach the end within {timeout_s} s")
        writes: dict[Write, bytes | None] = {}
        for msg in consume_available(consumer, _RESTORE_CHUNK, 0.5):
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    done = True
                    continue
                raise RuntimeError(f"changelog read failed: {err}")
            for write, value in changelog_writes(msg.key(), msg.value()):
                restore_write(db, writes, write, value)
            last_offset = msg.offset()
        if writes:
            applied += len(writes)
            db.apply(writes, {"changelog_offset": last_offset, "written_at_ms": now_ms})
        elif last_offset >= high - 1:
            done = True
    return applied
