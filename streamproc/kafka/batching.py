"""Consume without waiting for a full batch.

`Consumer.consume(n, timeout)` waits until n messages arrived or the timeout passed, so
a lone command would wait out the whole timeout. We wait for the first message only,
then take whatever else is already fetched, without waiting again.
"""

from __future__ import annotations

from confluent_kafka import Consumer, Message


def consume_available(consumer: Consumer, max_messages: int, timeout_s: float) -> list[Message]:
    first = consumer.poll(timeout_s)
    if first is None:
        return []
    if max_messages <= 1:
        return [first]
    return [first, *consumer.consume(max_messages - 1, 0)]
