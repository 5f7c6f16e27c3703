"""The changelog: every state write mirrored to a compacted topic, and recovery from it.

A changelog record's key is the column family id byte followed by the state key; its
value is the state value, or a tombstone for a delete. The topic has as many partitions
as the commands topic and partition p holds the state of partition p.
"""

from __future__ import annotations

import time

import structlog
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from streamproc.kafka.batching import consume_available
from streamproc.kafka.config import consumer_config
from streamproc.state.db import PartitionDb, Write
from streamproc.state.families import Family

log = structlog.get_logger("streamproc.engine")

#: Local state older than this may miss tombstones the broker already dropped
#: (delete.retention.ms is one day): such a copy is rebuilt from the changelog.
MAX_CHECKPOINT_AGE_MS = 12 * 3600 * 1000
_RESTORE_CHUNK = 10_000


def changelog_key(family: Family, key: bytes) -> bytes:
    return bytes((family,)) + key


def parse_changelog_key(data: bytes) -> Write:
    return Family(data[0]), data[1:]


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
            writes[parse_changelog_key(msg.key())] = msg.value()
            last_offset = msg.offset()
        if writes:
            applied += len(writes)
            db.apply(writes, {"changelog_offset": last_offset, "written_at_ms": now_ms})
        elif last_offset >= high - 1:
            done = True
    return applied
