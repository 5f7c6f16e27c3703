"""murmur2 partitioning as Java's client computes it, and keys that carry their partition."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamproc.protocol.partitioning import (
    MAX_PARTITIONS,
    counter_of_key,
    encode_key,
    murmur2,
    partition_for,
    partition_of_key,
)


@pytest.mark.parametrize("data, expected", [
    # the vectors of Kafka's own UtilsTest for Utils.murmur2
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
])
def test_murmur2_matches_kafka(data, expected):
    assert murmur2(data) == expected


def _murmur2_bytewise(data: bytes) -> int:
    """Utils.murmur2 transcribed byte by byte, as Java reads each word."""
    m, length = 0x5BD1E995, len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for j in range(0, length - length % 4, 4):
        k = data[j] | (data[j + 1] << 8) | (data[j + 2] << 16) | (data[j + 3] << 24)
        k = (k * m) & 0xFFFFFFFF
        k = ((k ^ (k >> 24)) * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    base, tail = length - length % 4, length % 4
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h = ((h ^ data[base]) * m) & 0xFFFFFFFF
    h = ((h ^ (h >> 13)) * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


@given(st.binary(max_size=600))
def test_murmur2_reads_words_as_java_does(data):
    # Short keys use the prepared word decoders, long ones (past 63 words) another path.
    assert murmur2(data) == _murmur2_bytewise(data)


@given(st.integers(0, MAX_PARTITIONS - 1), st.integers(0, (1 << 51) - 1))
def test_keys_carry_their_partition(partition, counter):
    key = encode_key(partition, counter)
    assert partition_of_key(key) == partition and counter_of_key(key) == counter


def test_partition_ids_out_of_range_are_refused():
    with pytest.raises(ValueError, match="partition must be in"):
        encode_key(MAX_PARTITIONS, 1)


@pytest.mark.kafka
def test_partition_for_agrees_with_librdkafkas_java_compatible_partitioner(bootstrap, namespace):
    from confluent_kafka import Producer

    from streamproc.kafka.admin import TopicAdmin
    from streamproc.protocol.topics import Topics

    topic = f"{namespace}.murmur"
    TopicAdmin(bootstrap, Topics(namespace)).ensure({topic: (7, {})})
    placed = {}
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2"})
    keys = [f"order-{i}" for i in range(200)]
    for k in keys:
        producer.produce(topic, b"x", k.encode(),
                         on_delivery=lambda err, msg, k=k: placed.__setitem__(k, msg.partition()))
    producer.flush(30)
    assert placed == {k: partition_for(k, 7) for k in keys}
