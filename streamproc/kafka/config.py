"""Client configurations, in one place so every process agrees on isolation and latency settings."""

from __future__ import annotations

from typing import Any

#: Low fetch waits: an idle partition should answer within a millisecond or two.
_LATENCY = {"fetch.wait.max.ms": 5, "fetch.min.bytes": 1}


def consumer_config(bootstrap: str, group: str | None, **extra: Any) -> dict[str, Any]:
    """A read_committed consumer: nothing from an aborted or open transaction is ever seen."""
    conf = {
        "bootstrap.servers": bootstrap,
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
    return conf


def producer_config(bootstrap: str, **extra: Any) -> dict[str, Any]:
    """An idempotent producer with acks=all; partitions are always computed by us."""
    conf = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 1,
        "compression.type": "none",
    }
    conf.update(extra)
    return conf
