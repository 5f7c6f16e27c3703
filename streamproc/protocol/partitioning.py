"""Where a record goes: Kafka's murmur2 partitioner and keys that carry their partition.

Every producer, in any language, must agree on the partition of a routing key. Java's
default partitioner uses murmur2 and librdkafka's uses CRC32, so we compute the
partition ourselves (the same way as Java's client) and set it on every record.
"""

from __future__ import annotations

import struct

#: Keys are (partition << KEY_PARTITION_SHIFT) | counter, as in Zeebe: 13 bits of
#: partition id, 51 bits of per-partition counter.
KEY_PARTITION_SHIFT = 51
MAX_PARTITIONS = 1 << 13
_COUNTER_MASK = (1 << KEY_PARTITION_SHIFT) - 1
#: Decoders of n little-endian 32-bit words, for the keys of usual lengths.
_WORDS = tuple(struct.Struct(f"<{n}I") for n in range(64))


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2), as a signed 32-bit int."""
    length = len(data)
    m = 0x5BD1E995
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    n4 = length // 4
    # The little-endian words read in one call: indexing and shifting bytes was most of the
    # cost (a schedule's START is routed by its workflow id, one hash per action).
    for k in _WORDS[n4].unpack_from(data) if n4 < len(_WORDS) else struct.unpack_from(f"<{n4}I", data):
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    tail = length & 3
    base = n4 * 4
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(routing_key: str | bytes, partitions: int) -> int:
    """The partition of a routing key, as Java's default partitioner computes it."""
    data = routing_key.encode() if isinstance(routing_key, str) else routing_key
    return (murmur2(data) & 0x7FFFFFFF) % partitions


def encode_key(partition: int, counter: int) -> int:
    if not 0 <= partition < MAX_PARTITIONS:
        raise ValueError(f"partition must be in [0, {MAX_PARTITIONS}), got {partition}")
    return (partition << KEY_PARTITION_SHIFT) | counter


def partition_of_key(key: int) -> int:
    """The partition that owns an entity key (job key, incident key)."""
    if key < 0:
        raise ValueError(f"an entity key is >= 0, got {key}")
    return key >> KEY_PARTITION_SHIFT


def counter_of_key(key: int) -> int:
    return key & _COUNTER_MASK


#: Commands addressed by a name rather than a key: the value field that names their
#: partition (a workflow's id, a schedule's id).
ROUTING_FIELDS = {"WORKFLOW": "workflow_id", "SCHEDULE": "schedule_id"}


def routing_key_of(value_type: str, value: dict | None) -> str | None:
    """The routing key of a command of `value_type`, or None when it goes by entity key."""
    field = ROUTING_FIELDS.get(value_type)
    return None if field is None or value is None else value[field]
