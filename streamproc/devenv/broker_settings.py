"""Defaults of the local broker, the environment variables that override them, and the facts that
depend on the Kafka version.

LocalBroker's constructor arguments win over the environment, which wins over these defaults.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from streamproc.devenv.broker_errors import BrokerError
from streamproc.user_dirs import cache_home, state_home

# Loopback only: the development broker is never reachable from another machine.
HOST = "127.0.0.1"
DEFAULT_PORT = 19092
DEFAULT_KAFKA_VERSION = "4.1.1"
#: Kafka's own default (kafka-server-start.sh); a fixed size, so the young generation
#: (a share of it, see broker_jvm.jvm_command) is as large from the start.
DEFAULT_HEAP = "-Xms1g -Xmx1g"

ENV_DIR = "STREAMPROC_BROKER_DIR"
ENV_PORT = "STREAMPROC_BROKER_PORT"
ENV_CONTROLLER_PORT = "STREAMPROC_BROKER_CONTROLLER_PORT"
ENV_VERSION = "STREAMPROC_KAFKA_VERSION"
ENV_HEAP = "STREAMPROC_BROKER_HEAP"
#: More JVM options, after ours (so they win): e.g. to try another collector or JIT setting.
ENV_JVM_OPTS = "STREAMPROC_BROKER_JVM_OPTS"


def default_state_dir() -> Path:
    """``$STREAMPROC_BROKER_DIR``, else ``$XDG_STATE_HOME/streamproc/kafka``."""
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env).expanduser()
    return state_home() / "kafka"


def default_lib_dir(kafka_version: str) -> Path:
    """The jar cache of one Kafka version: ``$XDG_CACHE_HOME/streamproc/kafka-<version>/lib``."""
    return cache_home() / f"kafka-{kafka_version}" / "lib"



def port_from_env(name: str) -> int | None:
    """The port number in environment variable ``name``, or None if it is unset or blank."""
    value = os.environ.get(name, "").strip()
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        raise BrokerError(f"{name}={value!r} is not a port number") from None


def kafka_major_version(kafka_version: str) -> int:
    m = re.match(r"(\d+)", kafka_version)
    if not m:
        raise BrokerError(f"cannot read a major version from Kafka version {kafka_version!r}")
    return int(m.group(1))


def uses_log4j2(kafka_version: str) -> bool:
    """Kafka 4 moved the broker from log4j 1.x to log4j2 (KIP-653): other jars, config and JVM flag."""
    return kafka_major_version(kafka_version) >= 4


def minimum_java_version(kafka_version: str) -> int:
    return 17 if kafka_major_version(kafka_version) >= 4 else 8
