"""How the public API takes a call's arguments, as Temporal's SDK does: one as `arg`, or
several as `args`; an optional timeout as a `timedelta` or None."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

__all__ = ["NO_ARG", "call_arguments", "timeout_option"]

#: The default of an `arg` parameter: no single argument was given (None is an argument).
NO_ARG: Any = object()


def call_arguments(arg: Any, args: Sequence[Any]) -> list[Any]:
    """`[arg]` when one argument was given, else `args`; both at once is an error."""
    if arg is not NO_ARG:
        if args:
            raise ValueError("give either arg or args, not both")
        return [arg]
    return list(args)


def timeout_option(value: timedelta | None, name: str) -> timedelta:
    """An optional timeout argument: None is zero (no limit), anything but a timedelta an error."""
    if value is None:
        return timedelta(0)
    if not isinstance(value, timedelta):
        raise TypeError(f"{name} must be a timedelta or None, got {value!r}")
    return value
