"""How the public API takes a call's arguments, as Temporal's SDK does: one as `arg`, or
several as `args`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["NO_ARG", "call_arguments"]

#: The default of an `arg` parameter: no single argument was given (None is an argument).
NO_ARG: Any = object()


def call_arguments(arg: Any, args: Sequence[Any]) -> list[Any]:
    """`[arg]` when one argument was given, else `args`; both at once is an error."""
    if arg is not NO_ARG:
        if args:
            raise ValueError("give either arg or args, not both")
        return [arg]
    return list(args)
