"""Parsing of command-line values shared by the `streamproc` commands."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import click
import orjson

from streamproc.semantics.go_duration import GoDurationError, parse_go_duration_ns


def json_value(text: str) -> Any:
    """A JSON value given on the command line; a click usage error if it is not JSON."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise click.BadParameter(f"not valid JSON: {exc}") from None


class Duration(click.ParamType):
    """A duration as Temporal's CLI takes it: ``30s``, ``1h30m``, ``7d``, ``250ms`` (Go's
    syntax plus days); a bare number is seconds, as these options always took. With
    `allow_none`, ``none`` means no limit (the value None)."""

    name = "duration"

    def __init__(self, minimum: timedelta = timedelta(0), *, allow_none: bool = False) -> None:
        self.minimum = minimum
        self.allow_none = allow_none

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> timedelta | None:
        if value is None or isinstance(value, timedelta):
            return value
        text = str(value).strip()
        if self.allow_none and text.lower() == "none":
            return None
        try:
            duration = timedelta(seconds=float(text))
        except (ValueError, OverflowError):
            try:
                duration = timedelta(microseconds=parse_go_duration_ns(text, days=True) // 1000)
            except GoDurationError:
                self.fail(f"{text!r} is not a duration: use a number and a unit, like 30s, 1h30m, 7d, 250ms", param, ctx)
        if duration < self.minimum:
            self.fail(f"{text!r} is shorter than the least allowed, {_seconds(self.minimum)}", param, ctx)
        return duration

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "DURATION"


def _seconds(value: timedelta) -> str:
    return f"{value.total_seconds():g}s"


#: Any length of time, zero included; and one that must be longer than zero.
DURATION = Duration()
POSITIVE_DURATION = Duration(timedelta(milliseconds=1))
