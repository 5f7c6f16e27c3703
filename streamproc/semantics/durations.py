"""Duration arithmetic with Go's integer semantics.

The reference server keeps durations as signed 64-bit nanosecond counts
(``time.Duration``). A Python port has to reproduce its overflow and truncation on
purpose, because ``timedelta`` neither overflows at 292 years nor carries nanoseconds.
The helpers here are the only place that converts between the two.
"""

from __future__ import annotations

from datetime import timedelta

from streamproc.semantics.errors import InvalidArgument

__all__ = [
    "ZERO",
    "MAX_DURATION",
    "INT64_MAX",
    "INT64_MIN",
    "to_nanoseconds",
    "from_nanoseconds",
    "saturate_int64",
    "wrap_int64",
    "validate_and_cap",
]

ZERO = timedelta(0)

#: Every API duration is silently capped at 100 x 365 days (3,153,600,000 s).
MAX_DURATION = timedelta(days=100 * 365)

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

_NS_PER_US = 1_000
_ONE_US = timedelta(microseconds=1)


def to_nanoseconds(value: timedelta) -> int:
    """Return ``value`` as an exact integer number of nanoseconds (unbounded)."""
    return (value // _ONE_US) * _NS_PER_US


def from_nanoseconds(ns: int) -> timedelta:
    """Return ``ns`` nanoseconds as a ``timedelta``.

    ``timedelta`` resolves microseconds only, so the sub-microsecond remainder is
    dropped, truncating toward zero like Go's integer division.
    """
    us = abs(ns) // _NS_PER_US
    return timedelta(microseconds=us if ns >= 0 else -us)


def saturate_int64(ns: int) -> int:
    """Clamp ``ns`` into int64, as protobuf's ``Duration.AsDuration`` does on overflow."""
    return max(INT64_MIN, min(INT64_MAX, ns))


def wrap_int64(ns: int) -> int:
    """Reduce ``ns`` to int64 with two's-complement wrap-around (Go integer overflow)."""
    return (ns + 2**63) % 2**64 - 2**63


def validate_and_cap(value: timedelta, error_prefix: str) -> timedelta:
    """Reject a negative duration, cap a huge one at :data:`MAX_DURATION`.

    Raises :class:`InvalidArgument` with ``"<error_prefix>: negative duration"``, the
    server's wording (e.g. ``invalid ScheduleToCloseTimeout: negative duration``).
    """
    if value < ZERO:
        raise InvalidArgument(f"{error_prefix}: negative duration")
    return min(value, MAX_DURATION)
