"""Consume without waiting for a full batch, and tell whether a consumer has read to the end.

`Consumer.consume(n, timeout)` waits until n messages arrived or the timeout passed, so
a lone command would wait out the whole timeout. We wait for the first message only,
then take whatever else is already fetched, without waiting again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition


def consume_available(consumer: Consumer, max_messages: int, timeout_s: float) -> list[Message]:
    first = consumer.poll(timeout_s)
    if first is None:
        return []
    if max_messages <= 1:
        return [first]
    return [first, *consumer.consume(max_messages - 1, 0)]


def resume_now(consumer: Consumer, partitions: list[TopicPartition]) -> None:
    """Resume fetching `partitions` at once.

    With every partition paused, librdkafka's fetcher idles and notices a resume only on
    its next wakeup, about a second later (measured: 980 ms each time), so a worker that
    pauses whenever its slots are full took one batch of tasks a second. A seek to the
    position the consumer is at wakes the fetcher and changes nothing else."""
    consumer.resume(partitions)
    for tp in consumer.position(partitions):
        if tp.offset >= 0:  # nothing consumed yet: the fetcher starts from the committed offset
            try:
                consumer.seek(tp)
            except KafkaException:  # taken away by a rebalance meanwhile: nothing to fetch
                pass


def close_in_background(client) -> threading.Thread:
    """Close a consumer on a daemon thread of its own: a close can wait on a broker that is
    away (or, for a dead client, on nothing that will come), and the caller must not. Join
    the returned thread to wait, with a bound."""
    def close() -> None:
        try:
            client.close()
        except Exception:  # noqa: BLE001 - a dead client's close may fail: it is gone either way
            pass
    thread = threading.Thread(target=close, name="kafka-close", daemon=True)
    thread.start()
    return thread


def read_to_the_end(consumer: Consumer, topic: str, partitions, timeout_s: float = 2.0) -> bool:
    """Whether the consumer has read every record of `partitions` of `topic` committed so
    far (asking the broker for their ends). Under read_committed the position moves past a
    transaction's commit marker too, so a partition read to its end has its position at
    the high watermark; a partition never read has no position and must be empty."""
    try:
        for tp in consumer.position([TopicPartition(topic, pid) for pid in sorted(partitions)]):
            low, high = consumer.get_watermark_offsets(tp, timeout=timeout_s, cached=False)
            if tp.offset < high and low < high:
                return False
    except KafkaException:
        return False
    return True


def messages_to_the_end(consumer: Consumer, topic: str, partition: int, timeout_s: float) -> Iterator[Message]:
    """The messages of one partition the consumer is assigned, from its position up to the
    partition's end as of the call (errors skipped); TimeoutError if that takes longer than
    `timeout_s`. Transaction markers count as offsets: the position passes them once read."""
    tp = TopicPartition(topic, partition)
    low, end = consumer.get_watermark_offsets(tp, timeout_s)
    deadline = time.monotonic() + timeout_s
    while max(consumer.position([tp])[0].offset, low) < end:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic} partition {partition} not read to offset {end} within {timeout_s} s")
        for msg in consume_available(consumer, 500, 0.2):
            if msg.error() is None:
                yield msg

