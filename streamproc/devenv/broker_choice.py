"""Which broker to talk to: the one the environment names, if it answers, or a local one
started here (tests, benchmarks, `streamproc dev`)."""

from __future__ import annotations

import os
from typing import Any

from streamproc.devenv.broker import LocalBroker
from streamproc.devenv.broker_errors import BrokerError
from streamproc.devenv.broker_probe import LOOPBACK, broker_reachable, first_host_port

__all__ = ["ensure_broker"]


def ensure_broker(bootstrap_env: str = "STREAMPROC_BOOTSTRAP", *, timeout: float = 90.0,
                  **broker_kwargs: Any) -> tuple[str, LocalBroker | None]:
    """A broker to talk to: ``(bootstrap, None)`` if ``$bootstrap_env`` names one that answers,
    else ``(bootstrap, broker)`` for a LocalBroker started (or found running) here.

    If the variable names a loopback address that does not answer, the local broker is started on
    that port; a remote address that does not answer is an error (no silent substitute).
    ``broker.launched`` tells whether this call launched the JVM (and so should stop it).
    """
    named = os.environ.get(bootstrap_env, "").strip() if bootstrap_env else ""
    if named:
        from streamproc.kafka.user_config import user_properties  # a secured cluster's settings

        client_config = {k: v for k, v in user_properties().items() if k != "bootstrap.servers"}
        if broker_reachable(named, timeout=5.0, client_config=client_config):
            return named, None
        host_port = first_host_port(named)
        if host_port is None or host_port[0] not in LOOPBACK or "," in named:
            raise BrokerError(f"{bootstrap_env}={named} does not answer as a Kafka broker")
        broker_kwargs.setdefault("port", host_port[1])
    broker = LocalBroker(**broker_kwargs)
    return broker.start(timeout=timeout), broker
