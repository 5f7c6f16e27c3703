"""Configuration from environment variables, the same for dev mode, the CLI and docker compose."""

from __future__ import annotations

import dataclasses
import os
import socket
from pathlib import Path

from streamproc.kafka.user_config import user_bootstrap
from streamproc.user_dirs import state_home

#: Every variable streamproc reads, with what it means (also checked against docker-compose.yml).
ENVIRONMENT = {
    "STREAMPROC_BOOTSTRAP": "Kafka bootstrap servers (default: bootstrap.servers of the Kafka properties, "
                            "else 127.0.0.1:19092)",
    "STREAMPROC_KAFKA_CONFIG": "a librdkafka properties file (key=value) applied to every Kafka client; "
                               "STREAMPROC_KAFKA_<PROPERTY> variables (SASL_MECHANISMS: sasl.mechanisms) win over it",
    "STREAMPROC_NAMESPACE": "prefix of every topic and consumer group (default streamproc)",
    "STREAMPROC_PARTITIONS": "partitions of the commands/events/changelog topics, used when creating them (default 4)",
    "STREAMPROC_STATE_DIR": "where engines keep their RocksDB state (default ~/.local/state/streamproc)",
    "STREAMPROC_ENGINE_ID": "stable id of an engine process, in its transactional ids; no '#' (default: host name)",
    "STREAMPROC_LOG_FORMAT": "console or json (default: console on a terminal, json otherwise)",
    "STREAMPROC_LOG_LEVEL": "debug, info, warning or error (default info)",
    "STREAMPROC_TASK_QUEUES": "task queues the engine accepts commands for, comma-separated glob patterns "
                              "such as orders,payments-* (default *, any)",
    "STREAMPROC_MAX_TASK_QUEUES": "distinct task queues (so topics) one partition may admit (default 1000)",
    "STREAMPROC_REPLICATION_FACTOR": "replicas of every topic streamproc creates (default -1: the broker's "
                                     "default.replication.factor)",
    "STREAMPROC_MIN_INSYNC_REPLICAS": "min.insync.replicas of every topic streamproc creates (default: the broker's)",
    "STREAMPROC_SCHEMA_REGISTRY_URL": "a Schema Registry (Confluent's REST API): the engine writes events in its wire "
                                      "format, schema registered under <namespace>.events-value (default: none, "
                                      "plain Avro with a content-type header)",
    "STREAMPROC_CLIENT_RESEND_MS": "how long a client call waits for the engine's answer before sending its "
                                   "command again with the same request id (default 5000)",
}


DEFAULT_BOOTSTRAP = "127.0.0.1:19092"
#: Joins an engine id to the suffix of its second transactional producer ("<id>#2",
#: streamproc/kafka/transactions.py), so engine ids may not contain it.
ENGINE_ID_SEPARATOR = "#"
DEFAULT_NAMESPACE = "streamproc"
DEFAULT_PARTITIONS = 4
DEFAULT_MAX_TASK_QUEUES = 1000
DEFAULT_CLIENT_RESEND_MS = 5000


def _env(name: str, default: str) -> str:
    value = os.environ.get(name, "").strip()
    return value or default


def _positive(name: str, default: int) -> int:
    value = _env(name, str(default))
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    bootstrap: str = DEFAULT_BOOTSTRAP
    namespace: str = DEFAULT_NAMESPACE
    partitions: int = DEFAULT_PARTITIONS
    state_dir: Path = dataclasses.field(default_factory=state_home)
    engine_id: str = dataclasses.field(default_factory=socket.gethostname)
    #: Glob patterns of the task queues commands may name; their count per partition.
    task_queues: str = "*"
    max_task_queues: int = DEFAULT_MAX_TASK_QUEUES
    #: Between two copies of a client request that got no answer.
    client_resend_ms: int = DEFAULT_CLIENT_RESEND_MS
    #: Replicas of the topics we create (-1: the broker's default), and their min.insync.replicas (0: the broker's).
    replication_factor: int = -1
    min_insync_replicas: int = 0
    #: Where the events schema is registered ("": events are plain Avro, no registry).
    schema_registry_url: str = ""

    @classmethod
    def from_env(cls, **overrides) -> Settings:
        partitions = _env("STREAMPROC_PARTITIONS", str(DEFAULT_PARTITIONS))
        if not partitions.isdigit() or not 1 <= int(partitions) <= 8192:
            raise ValueError(f"STREAMPROC_PARTITIONS must be an integer in [1, 8192], got {partitions!r}")
        values = dict(
            bootstrap=_env("STREAMPROC_BOOTSTRAP", user_bootstrap() or DEFAULT_BOOTSTRAP),
            namespace=_env("STREAMPROC_NAMESPACE", DEFAULT_NAMESPACE),
            partitions=int(partitions),
            state_dir=Path(_env("STREAMPROC_STATE_DIR", str(state_home()))).expanduser(),
            engine_id=_env("STREAMPROC_ENGINE_ID", socket.gethostname()),
            task_queues=_env("STREAMPROC_TASK_QUEUES", "*"),
            max_task_queues=_positive("STREAMPROC_MAX_TASK_QUEUES", DEFAULT_MAX_TASK_QUEUES),
            client_resend_ms=_positive("STREAMPROC_CLIENT_RESEND_MS", DEFAULT_CLIENT_RESEND_MS),
            replication_factor=_replication_factor(),
            min_insync_replicas=_positive("STREAMPROC_MIN_INSYNC_REPLICAS", 0) if _env(
                "STREAMPROC_MIN_INSYNC_REPLICAS", "") else 0,
            schema_registry_url=_env("STREAMPROC_SCHEMA_REGISTRY_URL", ""),
        )
        values.update({k: v for k, v in overrides.items() if v is not None})
        if ENGINE_ID_SEPARATOR in values["engine_id"]:
            raise ValueError(f"STREAMPROC_ENGINE_ID must not contain {ENGINE_ID_SEPARATOR!r}, "
                             f"got {values['engine_id']!r}")
        return cls(**values)


def _replication_factor() -> int:
    raw = _env("STREAMPROC_REPLICATION_FACTOR", "-1")
    if raw != "-1" and not (raw.isdigit() and 1 <= int(raw) <= 32):
        raise ValueError(f"STREAMPROC_REPLICATION_FACTOR must be -1 (the broker's default) or in [1, 32], got {raw!r}")
    return int(raw)
