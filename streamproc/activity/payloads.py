"""Record text for what crosses the wire, through the default data converter.

Arguments travel as one JSON list and are spread into the function's parameters, so an
activity taking one list argument receives it whole. Details (heartbeat, error and
cancellation details) are a list too, and come back as a tuple. Code that has a
configured converter calls the same methods on its `DataConverter`
(streamproc/converter.py, which also describes the wire form).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from streamproc.converter import DataConverter

__all__ = ["encode", "decode", "encode_args", "decode_args", "decode_details"]


def encode(value: Any) -> str:
    """Record text of `value`; raises TypeError for what no converter can hold."""
    return DataConverter.default().encode(value)


def decode(text: str | None) -> Any:
    return DataConverter.default().decode(text)


def encode_args(args: Sequence[Any]) -> str:
    return DataConverter.default().encode_args(args)


def decode_args(text: str | None) -> tuple[Any, ...]:
    """A JSON list is the positional arguments; null is none; any other value is the
    single argument (a command written by hand need not wrap it in a list)."""
    return DataConverter.default().decode_args(text)


def decode_details(text: str | None) -> tuple[Any, ...]:
    """Details as a tuple, whether they were sent as a list (as we do) or a lone value."""
    return DataConverter.default().decode_details(text)
