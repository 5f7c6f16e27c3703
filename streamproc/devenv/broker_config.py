"""The files that configure the broker JVM: ``server.properties`` and the log4j configuration.

Rendering only: these functions take ports, paths and the Kafka version and return text or
values; LocalBroker writes them into its state directory on each start.
"""

from __future__ import annotations

import base64
import re
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from streamproc.devenv.broker_settings import HOST, uses_log4j2

NODE_ID = 1


def server_properties(port: int, controller_port: int, data_dir: Path,
                      extra_properties: Mapping[str, Any]) -> dict[str, str]:
    """The broker configuration, ``extra_properties`` applied last, every value as text."""
    props: dict[str, Any] = {
        # one JVM is broker and controller; static quorum (works on 3.9.x and 4.x)
        "process.roles": "broker,controller",
        "node.id": NODE_ID,
        "controller.quorum.voters": f"{NODE_ID}@{HOST}:{controller_port}",
        "listeners": f"PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{port}",
        "inter.broker.listener.name": "PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(data_dir),
        # one node: every replication factor and min ISR is 1, so acks=all and
        # transactions work (the engine produces with idempotence and transactions)
        "num.partitions": 1,
        "default.replication.factor": 1,
        "min.insync.replicas": 1,
        "offsets.topic.replication.factor": 1,
        "offsets.topic.num.partitions": 4,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "transaction.state.log.num.partitions": 4,
        "share.coordinator.state.topic.replication.factor": 1,
        "share.coordinator.state.topic.min.isr": 1,
        # the first consumer of a group gets its partitions at once
        "group.initial.rebalance.delay.ms": 0,
        # the engine creates every topic with its partitions and configs; a topic created
        # by accident (e.g. by a metadata request naming it) would have the wrong ones
        "auto.create.topics.enable": False,
        # compaction acts within seconds when a topic asks for it (segment.ms, min.cleanable...)
        "log.cleaner.backoff.ms": 1000,
        "log.retention.check.interval.ms": 10000,
        # after a crash (kill()) the restarted broker cannot register until the controller
        # expires its previous session: 3 s instead of 9 s makes a crash restart take ~4.5 s
        # instead of ~12 s.  The cost: a JVM stalled for > 3 s gets fenced until its next
        # heartbeat (clients retry through it; and see the next setting).
        "broker.session.timeout.ms": 3000,
        "broker.heartbeat.interval.ms": 500,
        # A fenced node must lead its partitions again as soon as it heartbeats. The controller
        # re-elects at unfencing only a replica it still trusts: one in the ISR or ELR, or the
        # sole last known leader; after a crash restart it trusts none of them (the unclean
        # shutdown empties the ELR) and relies on the last-known-leader rule alone.  An
        # "unclean" election is allowed here because with one replica it cannot lose anything:
        # the replica it elects is the only copy there is, the one every acknowledged write
        # went to.  So no sequence of stalls and crashes can leave a partition leaderless
        # while its only broker runs; the periodic pass (1 s, Kafka's default 5 min) elects
        # whatever the unfencing missed.
        "unclean.leader.election.enable": True,
        "unclean.leader.election.interval.ms": 1000,
        # a 2-core development machine
        "num.network.threads": 2,
        "num.io.threads": 4,
        "background.threads": 4,
        "num.recovery.threads.per.data.dir": 2,
        # log.flush.*, transaction.max.timeout.ms (15 min): Kafka defaults
    }
    props.update(extra_properties)
    return {key: _property_text(value) for key, value in props.items()}


def server_properties_file(props: Mapping[str, str]) -> str:
    """The text of ``server.properties`` holding ``props`` (ASCII, as the JVM reads it)."""
    lines = ["# written by streamproc.devenv.broker on each start; edits are overwritten",
             "# (pass extra_properties / --set key=value instead)"]
    lines += [f"{key}={_escape_property(value)}" for key, value in props.items()]
    return "\n".join(lines) + "\n"


def advertised_port(server_properties_text: str) -> int | None:
    """The client port a ``server.properties`` written by server_properties_file advertises."""
    m = re.search(r"^advertised\.listeners=PLAINTEXT://[^:\s]+:(\d+)", server_properties_text, re.M)
    return int(m.group(1)) if m else None


def log_config_name(kafka_version: str) -> str:
    return "log4j2.properties" if uses_log4j2(kafka_version) else "log4j.properties"


def broker_log_config(kafka_version: str, log_file: Path) -> str:
    """The broker's log4j configuration: INFO into ``log_file``, rolled at 10 MB, 3 old files kept."""
    log_path = _escape_property(str(log_file))
    if uses_log4j2(kafka_version):
        return f"""\
status = warn
appender.file.type = RollingFile
appender.file.name = FILE
appender.file.fileName = {log_path}
appender.file.filePattern = {log_path}.%i
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
appender.file.policies.type = Policies
appender.file.policies.size.type = SizeBasedTriggeringPolicy
appender.file.policies.size.size = 10MB
appender.file.strategy.type = DefaultRolloverStrategy
appender.file.strategy.max = 3
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.state.name = state.change.logger
logger.state.level = WARN
logger.controller.name = org.apache.kafka.controller
logger.controller.level = INFO
"""
    return f"""\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.RollingFileAppender
log4j.appender.file.File={log_path}
log4j.appender.file.MaxFileSize=10MB
log4j.appender.file.MaxBackupIndex=3
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.state.change.logger=WARN
"""


def storage_tool_log_config(kafka_version: str) -> str:
    """The storage tool's log4j configuration: warnings only, to stdout, so kafka.log stays the broker's."""
    if uses_log4j2(kafka_version):
        return ("status = warn\nappender.out.type = Console\nappender.out.name = OUT\n"
                "appender.out.layout.type = PatternLayout\n"
                "appender.out.layout.pattern = [%d] %p %m (%c)%n\n"
                "rootLogger.level = WARN\nrootLogger.appenderRef.out.ref = OUT\n")
    return ("log4j.rootLogger=WARN, out\nlog4j.appender.out=org.apache.log4j.ConsoleAppender\n"
            "log4j.appender.out.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.out.layout.ConversionPattern=[%d] %p %m (%c)%n\n")


def random_cluster_id() -> str:
    """A new cluster's id as the storage tool wants it: a Kafka Uuid (16 random bytes, base64url,
    no padding)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not text.startswith("-"):  # Kafka's Uuid.randomUuid avoids these too
            return text


def _property_text(value: Any) -> str:
    if isinstance(value, bool):  # Java spells them in lower case
        return "true" if value else "false"
    return str(value)


def _escape_property(value: str) -> str:
    """Escape a value for a java.util.Properties file (read as ISO-8859-1 by the JVM)."""
    out = []
    for ch in value.replace("\\", "\\\\"):
        if ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) > 0x7E or ord(ch) < 0x20:
            data = ch.encode("utf-16-be")
            out.extend("\\u%04X" % int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2))
        else:
            out.append(ch)
    return "".join(out)
