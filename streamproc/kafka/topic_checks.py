"""The engine's topics as they exist, checked against what the engine needs, before it runs.

A commands topic with another partition count than configured sends each key to another
partition than the one holding its state (the changelog and the RocksDB of that partition);
a changelog that is not compacted loses state at retention time. Both are refused at start
with the explanation, never worked around.
"""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, ConfigResource

from streamproc.kafka.errors import StartRefused
from streamproc.protocol.topics import Topics


def check_engine_topics(admin: AdminClient, topics: Topics, partitions: int, timeout_s: float = 30) -> None:
    """Raise `StartRefused` (one line) if the existing topics cannot be the engine's."""
    metadata = admin.list_topics(timeout=timeout_s).topics
    commands = metadata.get(topics.commands)
    if commands is not None and commands.partitions and len(commands.partitions) != partitions:
        raise StartRefused(
            f"topic {topics.commands} has {len(commands.partitions)} partitions, the engine is configured for "
            f"{partitions} (STREAMPROC_PARTITIONS): keys would be routed to partitions that do not hold their "
            f"state; set STREAMPROC_PARTITIONS={len(commands.partitions)} or use another namespace")
    resource = ConfigResource(ConfigResource.Type.TOPIC, topics.changelog)
    config = admin.describe_configs([resource])[resource].result(timeout=timeout_s)
    policy = config["cleanup.policy"].value if "cleanup.policy" in config else None
    if policy != "compact":
        raise StartRefused(
            f"topic {topics.changelog} has cleanup.policy={policy}, the engine's changelog needs "
            f"cleanup.policy=compact: with deletion, the state of partitions would be lost after retention; "
            f"set it with kafka-configs --alter --add-config cleanup.policy=compact")
