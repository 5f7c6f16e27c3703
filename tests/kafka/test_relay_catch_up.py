"""A partition the relay holds after an assignment or a rewind is released once the engine's
consumer has read its log to the end it had when the hold began (kafka/relay_catch_up.py),
not before; after a seek (a rewind, a batch put back) the committed offset says."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from streamproc.engine.relay import Relay
from streamproc.kafka.relay_catch_up import RelayCatchUp

pytestmark = pytest.mark.kafka


def _topic(bootstrap: str, namespace: str) -> str:
    topic = f"{namespace}.commands"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the topic is made
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    return topic


def _write(bootstrap: str, topic: str, count: int) -> None:
    """`count` records in a transaction: its commit marker takes an offset too."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-writer"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for _ in range(count):
        producer.produce(topic, b"command", partition=0)
    producer.commit_transaction(30)


def _consume(consumer: Consumer, count: int) -> list[int]:
    offsets = []
    for _ in range(100):
        for msg in consumer.consume(count - len(offsets), 0.5):
            if msg.error() is None:
                offsets.append(msg.offset())
        if len(offsets) >= count:
            return offsets
    raise AssertionError(f"read {offsets}, expected {count} records")


def test_a_held_partition_is_released_once_read_to_the_end_it_had_at_the_hold(bootstrap, namespace):
    topic = _topic(bootstrap, namespace)
    _write(bootstrap, topic, 3)  # an earlier owner's commands, not read yet
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{namespace}-engine",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, 0)])
        relay, catch_up = Relay(1), RelayCatchUp()
        relay.hold_all()
        catch_up.check(relay, consumer, topic, [0])
        assert relay.held(0)  # nothing read, nothing committed: the three are still to come
        assert _consume(consumer, 2) == [0, 1]
        catch_up.check(relay, consumer, topic, [0])
        assert relay.held(0)
        _write(bootstrap, topic, 1)  # after the hold began: not waited for (its end stays 4)
        assert _consume(consumer, 2) == [2, 4]
        catch_up.check(relay, consumer, topic, [0])
        assert not relay.held(0)

        # A rewind: the consumer seeks back to what is committed (its position is unknown
        # until it reads again); with nothing committed it must read the log again first.
        relay.hold_all()
        consumer.seek(TopicPartition(topic, 0, 0))
        catch_up.check(relay, consumer, topic, [0])
        assert relay.held(0)
        assert _consume(consumer, 4) == [0, 1, 2, 4]
        assert consumer.consume(10, 1) == []  # the last commit marker, passed
        catch_up.check(relay, consumer, topic, [0])
        assert not relay.held(0)

        # Committed up to the end: a hold right after a seek is released on the committed offset.
        consumer.commit(offsets=[TopicPartition(topic, 0, 6)], asynchronous=False)
        relay.hold_all()
        consumer.seek(TopicPartition(topic, 0, 6))
        catch_up.check(relay, consumer, topic, [0])
        assert not relay.held(0)
    finally:
        consumer.close()
