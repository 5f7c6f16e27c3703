"""Probes from outside the broker: is a port taken, does it accept connections, does a Kafka
broker answer metadata requests there (and has the one we launched begun to); where a
bootstrap list points."""

from __future__ import annotations

import re
import socket
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from streamproc.devenv.broker_errors import BrokerError
from streamproc.devenv.broker_process import is_alive
from streamproc.devenv.broker_settings import ENV_PORT, HOST

#: Host names of this machine's loopback interface, as a bootstrap list spells them.
LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


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


def wait_until_answering(pid: int, proc: subprocess.Popen[bytes] | None, port: int, timeout: float,
                         log_tail: Callable[[], str]) -> None:
    """Wait until the broker process `pid` (launched as `proc`, if by us) answers metadata
    requests on `port`; a BrokerError with `log_tail()` if it exits or the time is up."""
    bootstrap = f"{HOST}:{port}"
    deadline = time.monotonic() + timeout
    admin = None
    try:
        while True:
            if not is_alive(pid, proc):
                code = proc.returncode if proc is not None and proc.pid == pid else None
                how = f" with exit code {code}" if code is not None else ""
                raise BrokerError(f"the broker process (pid {pid}) exited{how} before answering on "
                                  f"{bootstrap}", log_tail())
            remaining = deadline - time.monotonic()
            if port_accepts(port):
                if admin is None:
                    admin = metadata_client(bootstrap, 2.0)
                if answers_metadata(admin, max(0.5, min(2.0, remaining))):
                    return
            if time.monotonic() >= deadline:
                raise BrokerError(f"the broker (pid {pid}) did not answer metadata requests on "
                                  f"{bootstrap} within {timeout:.0f} s", log_tail())
            time.sleep(0.1)
    finally:
        # close the client now, not whenever a traceback holding this frame goes away
        del admin


def first_host_port(bootstrap: str) -> tuple[str, int] | None:
    """(host, port) of the first address in a bootstrap list, or None if it has no port."""
    first = bootstrap.split(",")[0].strip()
    first = re.sub(r"^[A-Za-z_]+://", "", first)
    host, sep, port = first.rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host, int(port)
