"""A broker to talk to, before a command builds its clients: a command from a shell waits a
bounded time (`--connect-timeout`) for the cluster to answer, then says it did not, instead
of hanging in a client's retries."""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from streamproc.cli.params import DURATION
from streamproc.settings import Settings

#: Where `--connect-timeout` is kept, so the processes a command starts inherit it.
ENV_CONNECT_TIMEOUT = "STREAMPROC_CONNECT_TIMEOUT"
DEFAULT_CONNECT_TIMEOUT = timedelta(seconds=10)

_checked: set[str] = set()


def connect_timeout() -> timedelta:
    text = os.environ.get(ENV_CONNECT_TIMEOUT, "").strip()
    return DURATION.convert(text, None, None) if text else DEFAULT_CONNECT_TIMEOUT


def require_broker() -> Settings:
    """The settings, once a broker of theirs answered (`BrokerUnreachable` if none did within
    the connect timeout, `StartRefused` if the cluster refused our credentials)."""
    from streamproc.kafka.connection import check_connection

    settings = Settings.from_env()
    if settings.bootstrap not in _checked:
        check_connection(settings.bootstrap, connect_timeout().total_seconds(), require_broker=True)
        _checked.add(settings.bootstrap)
    return settings


def connected_client(**options: Any):
    """A `Client`, once its broker answered."""
    from streamproc.client.client import Client

    require_broker()
    return Client(**options)
