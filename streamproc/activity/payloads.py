"""JSON text for what crosses the wire: arguments, results and details.

Arguments travel as one JSON list and are spread into the function's parameters, so an
activity taking one list argument receives it whole. Details (heartbeat, error and
cancellation details) are a list too, and come back as a tuple.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

__all__ = ["encode", "decode", "encode_args", "decode_args", "decode_details"]

# Dict keys that are not strings (ints, enums) become strings rather than failing.
_OPTIONS = orjson.OPT_NON_STR_KEYS


def encode(value: Any) -> str:
    """JSON text of `value`; raises TypeError for what JSON cannot hold."""
    return orjson.dumps(value, option=_OPTIONS).decode()


def decode(text: str | None) -> Any:
    return None if text is None or text == "" else orjson.loads(text)


def encode_args(args: Sequence[Any]) -> str:
    return encode(list(args))


def decode_args(text: str | None) -> tuple[Any, ...]:
    """A JSON list is the positional arguments; null is none; any other value is the
    single argument (a command written by hand need not wrap it in a list)."""
    value = decode(text)
    if value is None:
        return ()
    return tuple(value) if isinstance(value, list) else (value,)


def decode_details(text: str | None) -> tuple[Any, ...]:
    """Details as a tuple, whether they were sent as a list (as we do) or a lone value."""
    value = decode(text)
    if value is None:
        return ()
    return tuple(value) if isinstance(value, list) else (value,)
