"""Development environment: a local single-node Kafka broker (``streamproc.devenv.broker``).

The names are loaded lazily so that ``python -m streamproc.devenv.broker`` does not import the
module twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["BrokerError", "LocalBroker", "broker_reachable", "ensure_broker"]

if TYPE_CHECKING:
    from .broker import BrokerError, LocalBroker, broker_reachable, ensure_broker


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import broker

        return getattr(broker, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
