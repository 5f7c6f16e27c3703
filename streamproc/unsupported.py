"""Names of the Temporal Python SDK that streamproc does not implement (yet): looking one up
raises NotImplementedError naming the feature, never an AttributeError deep inside.

Each public module that mirrors a ``temporalio`` module ends with
``__getattr__ = unsupported_names(__name__, {...})``; Python calls it only for names the
module does not define, ``from streamproc.common import SearchAttributeKey`` included.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["unsupported_names"]


def unsupported_names(module: str, features: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for `features`: name -> the feature it belongs to."""

    def __getattr__(name: str) -> Any:
        feature = features.get(name)
        if feature is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        raise NotImplementedError(f"{module}.{name} is not implemented by streamproc: {feature} "
                                  "(see docs/temporal-compatibility.md)")

    return __getattr__
