"""Probes from outside the broker: is a port taken, does it accept connections, does a Kafka
broker answer metadata requests there."""

from __future__ import annotations

import socket
from collections.abc import Mapping
from pathlib import Path

from streamproc.devenv.broker_errors import BrokerError
from streamproc.devenv.broker_settings import ENV_PORT, HOST


def port_in_use(port: int) -> bool:
    """True if something listens on 127.0.0.1:port (a bind with SO_REUSEADDR fails only then)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return True
    return False


def check_ports_free(ports: Mapping[str, int], state_dir: Path) -> None:
    """Fail before launching if a port the broker of ``state_dir`` needs is taken, naming the port,
    the way out and, if a Kafka broker already answers there, how to use that one instead.
    ``ports`` maps what each port is for ("client", "controller") to its number."""
    for what, port in ports.items():
        if not port_in_use(port):
            continue
        msg = (f"{what} port {HOST}:{port} is already in use by another process (not the broker of "
               f"{state_dir}); choose other ports (port=/controller_port=, --port, "
               f"{ENV_PORT}) or stop that process")
        if what == "client" and broker_reachable(f"{HOST}:{port}", timeout=1):
            msg += f"; a Kafka broker answers there: to use it, set STREAMPROC_BOOTSTRAP={HOST}:{port}"
        raise BrokerError(msg)


def port_accepts(port: int, timeout: float = 0.5) -> bool:
    """True if 127.0.0.1:port accepts a TCP connection: far cheaper than a Kafka client."""
    try:
        with socket.create_connection((HOST, port), timeout=timeout):
            return True
    except OSError:
        return False


def metadata_client(bootstrap: str, timeout: float, client_config: Mapping[str, str] | None = None):
    """An AdminClient for answers_metadata, quiet and quick to give up; `client_config`: more
    settings (a secured cluster's)."""
    from confluent_kafka.admin import AdminClient  # only the probes need the Kafka client

    ms = max(1000, int(timeout * 1000))
    return AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "socket.timeout.ms": ms,
            "socket.connection.setup.timeout.ms": ms,
            "log_level": 0,  # connection-refused chatter is expected while probing
            **(client_config or {}),
        }
    )


def answers_metadata(admin, timeout: float) -> bool:
    """True if a broker answers ``admin``'s metadata request within ``timeout`` s."""
    from confluent_kafka import KafkaException

    try:
        md = admin.list_topics(timeout=timeout)
    except KafkaException:
        return False
    return bool(md.brokers)


def broker_reachable(bootstrap: str, timeout: float = 5.0, client_config: Mapping[str, str] | None = None) -> bool:
    """True if a Kafka broker at ``bootstrap`` answers a metadata request within ``timeout`` s."""
    return answers_metadata(metadata_client(bootstrap, timeout, client_config), timeout)
