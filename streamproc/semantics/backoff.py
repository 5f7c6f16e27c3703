"""Backoff between attempts (SEMANTICS.md 1.4), with Go's float and integer behaviour.

The interval after attempt *n* fails is ``initial_interval x coefficient ** (n - 1)``,
computed the way the Temporal server computes it: float64 nanoseconds, Go's own
``math.Pow``, truncation toward zero, a clamp into int64, then the ``maximum_interval``
cap and the retry deadline. There is no jitter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from streamproc.semantics.durations import (
    INT64_MAX,
    from_nanoseconds,
    saturate_int64,
    to_nanoseconds,
)
from streamproc.semantics.enums import RetryState

__all__ = ["RetryDecision", "exponential_backoff_ns", "next_backoff_interval"]


@dataclass(frozen=True)
class RetryDecision:
    """The outcome of a retry computation.

    ``delay`` is set exactly when ``retry_state`` is ``IN_PROGRESS``: the time to wait
    from the failure before the next attempt becomes due.
    """

    retry_state: RetryState
    delay: timedelta | None = None

    @property
    def should_retry(self) -> bool:
        return self.retry_state is RetryState.IN_PROGRESS


def _ldexp(mantissa: float, exponent: int) -> float:
    try:
        return math.ldexp(mantissa, exponent)
    except OverflowError:
        return math.copysign(math.inf, mantissa)


def _go_pow_int(x: float, n: int) -> float:
    """``x ** n`` for an integer ``n >= 0``, bit for bit as Go's ``math.Pow`` computes it.

    Go squares the mantissa and accumulates the binary exponent separately instead of
    calling the C library, so for inexact powers (e.g. ``1.1 ** 7``) the last bit can
    differ from Python's ``**``; after multiplying by an interval in nanoseconds and
    truncating, that bit can move the result by one nanosecond.
    """
    if n == 0 or x == 1.0:
        return 1.0
    if n == 1:
        return x
    if math.isnan(x):
        return math.nan
    if x == 0.0:
        return x if n % 2 == 1 else 0.0
    if math.isinf(x):
        return x if (x > 0 or n % 2 == 1) else math.inf
    result_mantissa, result_exponent = 1.0, 0
    square_mantissa, square_exponent = math.frexp(x)
    i = n
    while i != 0:
        if square_exponent < -(1 << 12) or (1 << 12) < square_exponent:
            # Certain over/underflow; Go stops early to keep the shift from overflowing.
            result_exponent += square_exponent
            break
        if i & 1:
            result_mantissa *= square_mantissa
            result_exponent += square_exponent
        square_mantissa *= square_mantissa
        square_exponent <<= 1
        if square_mantissa < 0.5:
            square_mantissa += square_mantissa
            square_exponent -= 1
        i >>= 1
    return _ldexp(result_mantissa, result_exponent)


def exponential_backoff_ns(
    initial_interval: timedelta, backoff_coefficient: float, attempt: int
) -> int:
    """``initial_interval x coefficient ** (attempt - 1)`` in integer nanoseconds.

    Computed in float64 and truncated toward zero, then clamped to ``[0, 2**63 - 1]``
    as SEMANTICS.md 1.4 states. (Go's conversion of an out-of-range float is
    platform-defined; on amd64 an overflow actually comes out as 0, not ``2**63 - 1``.
    Both end up as ``maximum_interval`` in :func:`next_backoff_interval` whenever that
    is non-zero, which normalised policies guarantee. NaN, only possible with a NaN
    coefficient, gives 0.)
    """
    initial_ns = saturate_int64(to_nanoseconds(initial_interval))
    product = float(initial_ns) * _go_pow_int(backoff_coefficient, max(attempt, 1) - 1)
    if math.isnan(product):
        return 0
    if product >= 2.0**63:
        return INT64_MAX
    return max(0, int(product))


def next_backoff_interval(
    *,
    now: datetime,
    attempt: int,
    maximum_attempts: int,
    initial_interval: timedelta,
    maximum_interval: timedelta,
    backoff_coefficient: float,
    expiration: datetime | None = None,
    override_delay: timedelta | None = None,
) -> RetryDecision:
    """Decide whether attempt ``attempt`` (1-based, just failed at ``now``) is retried.

    ``expiration`` is the absolute retry deadline (``None`` = none). ``override_delay``
    replaces the exponential interval (a worker's ``next_retry_delay``); the caller
    chooses whether it also replaces ``maximum_interval``. The retry is refused at
    once, without a last attempt, when it would become due strictly after
    ``expiration``; landing exactly on it is allowed. There is no jitter.
    """
    attempt = max(attempt, 1)
    if maximum_attempts > 0 and attempt >= maximum_attempts:
        return RetryDecision(RetryState.MAXIMUM_ATTEMPTS_REACHED)
    if override_delay is not None:
        interval_ns = saturate_int64(to_nanoseconds(override_delay))
    else:
        interval_ns = exponential_backoff_ns(initial_interval, backoff_coefficient, attempt)
    maximum_ns = saturate_int64(to_nanoseconds(maximum_interval))
    if maximum_ns == 0 and interval_ns <= 0:
        return RetryDecision(RetryState.TIMEOUT)
    if maximum_ns != 0 and (interval_ns <= 0 or interval_ns > maximum_ns):
        interval_ns = maximum_ns
    # Compared in nanoseconds so that a far-future "now" cannot overflow datetime.
    if expiration is not None and interval_ns > to_nanoseconds(expiration - now):
        return RetryDecision(RetryState.TIMEOUT)
    return RetryDecision(RetryState.IN_PROGRESS, from_nanoseconds(interval_ns))
