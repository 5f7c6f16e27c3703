"""Go's ``time.ParseDuration``, the syntax of ``@every 1h30m`` in cron schedules.

A duration is an optional sign and a sequence of decimal numbers, each with an optional
fraction and a unit: ``ns``, ``us`` (or ``µs``/``μs``), ``ms``, ``s``, ``m``, ``h``.
There is no ``d``. ``0`` alone is allowed. The result is whole nanoseconds and must fit
an int64, as in Go.
"""

from __future__ import annotations

import re
from fractions import Fraction

__all__ = ["GoDurationError", "parse_go_duration_ns"]

_UNIT_NS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5 micro sign
    "μs": 1_000,  # U+03BC Greek mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
#: Temporal's schedules add a day unit to Go's (`@every 1d`, SEMANTICS.md 8.2).
_DAY_NS = 86_400_000_000_000
_INT64_MAX = 2**63 - 1
# One "number unit" element: digits with an optional fraction (".5", "1.", "1.5"); the
# unit runs to the next digit or dot, and Go reports it whole when unknown.
_ELEMENT = re.compile(r"(\d*)(?:\.(\d*))?([^\d.]*)")


class GoDurationError(ValueError):
    """The text is not a Go duration; the message is Go's (``time: invalid duration "1d"``)."""


def parse_go_duration_ns(text: str, *, days: bool = False) -> int:
    """Nanoseconds of a Go duration string, e.g. ``"1h30m"`` -> 5_400_000_000_000; with
    `days`, ``d`` (24 h) is a unit too, as in Temporal's schedule specs."""
    units = {**_UNIT_NS, "d": _DAY_NS} if days else _UNIT_NS
    quoted = f'"{text}"'
    rest = text
    negative = False
    if rest[:1] in ("-", "+"):
        negative = rest[0] == "-"
        rest = rest[1:]
    if rest == "0":
        return 0
    if not rest:
        raise GoDurationError(f"time: invalid duration {quoted}")
    total = 0
    while rest:
        element = _ELEMENT.match(rest)
        whole, fraction, unit = element.groups()
        if not whole and not fraction:
            raise GoDurationError(f"time: invalid duration {quoted}")
        if not unit:
            raise GoDurationError(f"time: missing unit in duration {quoted}")
        if unit not in units:
            raise GoDurationError(f"time: unknown unit \"{unit}\" in duration {quoted}")
        # Go truncates each element's fraction to whole nanoseconds before adding it.
        value = int(whole or "0") * units[unit]
        if fraction:
            value += int(Fraction(int(fraction), 10 ** len(fraction)) * units[unit])
        total += value
        if total > _INT64_MAX + (1 if negative else 0):
            raise GoDurationError(f"time: invalid duration {quoted}")
        rest = rest[element.end():]
    return -total if negative else total
