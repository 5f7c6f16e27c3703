"""Development environment: a local single-node Kafka broker (``streamproc.devenv.broker``).

The names are loaded lazily so that ``python -m streamproc.devenv.broker`` does not find the module
already imported by its package (runpy warns about that, and the module would run twice).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["BrokerError", "LocalBroker", "broker_reachable", "ensure_broker"]

if TYPE_CHECKING:
    from streamproc.devenv.broker import BrokerError, LocalBroker, broker_reachable
    from streamproc.devenv.broker_choice import ensure_broker


def __getattr__(name: str) -> Any:
    if name == "ensure_broker":
        from streamproc.devenv.broker_choice import ensure_broker

        return ensure_broker
    if name in __all__:
        from streamproc.devenv import broker

        return getattr(broker, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
