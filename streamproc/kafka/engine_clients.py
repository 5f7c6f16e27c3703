"""The engine's Kafka client settings: the transactional producers and the static consumer."""

from __future__ import annotations

from typing import Any

from streamproc.kafka.config import client_id, consumer_config, producer_config
from streamproc.protocol.topics import Topics
from streamproc.settings import Settings

#: librdkafka waits up to 10 s between reconnection attempts by default: after a broker
#: restart, up to 10 s more before a client notices it is back. Every engine client uses 1 s.
RECONNECT = {"reconnect.backoff.ms": 100, "reconnect.backoff.max.ms": 1000}


def engine_producer_config(settings: Settings, transactional_id: str, transaction_timeout_ms: int,
                           logging: dict[str, Any]) -> dict[str, Any]:
    """`logging`: the `logger` and `error_cb` of a `ClientLog`."""
    return producer_config(settings.bootstrap, **RECONNECT, **logging, **{
        "client.id": client_id("engine", settings.engine_id),
        "transactional.id": transactional_id,
        "transaction.timeout.ms": transaction_timeout_ms,
        "linger.ms": 5,
        "batch.num.messages": 10_000,
        # A transaction begun right after a commit often meets CONCURRENT_TRANSACTIONS
        # while the previous markers are written; librdkafka's default 100 ms retry
        # backoff would then put 100 ms on the next batch (Java uses 20 ms, KAFKA-5477).
        "retry.backoff.ms": 2,
        "retry.backoff.max.ms": 50,
    })


def engine_consumer_config(settings: Settings, topics: Topics, logging: dict[str, Any]) -> dict[str, Any]:
    return consumer_config(settings.bootstrap, topics.engine_group, **RECONNECT, **logging, **{
        "client.id": client_id("engine", settings.engine_id),
        "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000,
        "max.poll.interval.ms": 600_000,
        # Static membership: a restarted engine gets its partitions back at once,
        # without waiting for the session timeout or moving other partitions.
        "group.instance.id": settings.engine_id,
    })
