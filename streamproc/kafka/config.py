"""Client configurations, in one place so every process agrees on isolation and latency settings.

Every Kafka client streamproc builds gets its settings here, with the user's own properties
(`kafka/user_config.py`: security, SASL, TLS...) over streamproc's tuning.
"""

from __future__ import annotations

from typing import Any

from streamproc.kafka.client_log import ClientLog
from streamproc.kafka.user_config import with_user_properties

#: A fetch is a long poll: the broker answers it as soon as one byte can be returned (a
#: record appended, or a commit marker making a transaction's records readable), whatever
#: the maximum wait; measured on the local broker, a committed record reaches a waiting
#: read_committed consumer in about 0.5 ms at 5, 50 or 500 ms. The wait only bounds how
#: often an idle consumer asks again: ten idle consumers cost the broker about a quarter
#: of a core at 5 ms and 2% at 100 ms, CPU that the engine and workers need on a small box.
_LATENCY = {"fetch.wait.max.ms": 100, "fetch.min.bytes": 1}


#: What every client of ours calls itself unless it says more (an engine, a worker): the
#: broker's request logs and quotas, and `kafka-consumer-groups --describe`, show it.
CLIENT_ID = "streamproc"


def client_id(role: str, name: str) -> str:
    """`streamproc-<role>-<name>`, e.g. streamproc-engine-engine-1, streamproc-worker-host-42."""
    return f"{CLIENT_ID}-{role}-{name}"


def consumer_config(bootstrap: str, group: str | None, **extra: Any) -> dict[str, Any]:
    """A read_committed consumer: nothing from an aborted or open transaction is ever seen."""
    conf = {
        "bootstrap.servers": bootstrap,
        "client.id": CLIENT_ID,
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": False,
        **_LATENCY,
    }
    if group is not None:
        conf["group.id"] = group
        # cooperative rebalancing: partitions that do not move keep processing
        conf["partition.assignment.strategy"] = "cooperative-sticky"
    conf.update(extra)
    return with_user_properties(_logged(conf, "consumer"), bootstrap)


def producer_config(bootstrap: str, **extra: Any) -> dict[str, Any]:
    """An idempotent producer with acks=all; partitions are always computed by us."""
    conf = {
        "bootstrap.servers": bootstrap,
        "client.id": CLIENT_ID,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 1,
        "compression.type": "none",
    }
    conf.update(extra)
    return with_user_properties(_logged(conf, "producer"), bootstrap)


def admin_config(bootstrap: str, **extra: Any) -> dict[str, Any]:
    """An AdminClient's settings: the servers and the user's properties."""
    return with_user_properties(_logged({"bootstrap.servers": bootstrap, "client.id": CLIENT_ID, **extra}, "admin"),
                                bootstrap)


def _logged(conf: dict[str, Any], role: str) -> dict[str, Any]:
    """`conf` with librdkafka's log lines and error events going to structlog (one line per
    kind per interval), unless its caller routes them itself: without a `logger`, the
    library writes `%3|...` lines straight to stderr, across whatever else is written."""
    if "logger" not in conf or "error_cb" not in conf:
        routed = ClientLog(conf.get("group.id") or role).config()
        for name, value in routed.items():
            conf.setdefault(name, value)
    return conf
