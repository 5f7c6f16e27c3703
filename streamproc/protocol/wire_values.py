"""Values as records carry them: times and durations in whole milliseconds, retry
policies and activity timeouts as their records, and back.

Pure (no Kafka client): the engine's state and events and the SDK's commands use them.
The SDK rounds a duration up (`ceil_ms`, `retry_policy_record`): a positive timeout under
a millisecond must not become "none"; the engine's values are whole milliseconds already.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from streamproc.semantics.activity_timeouts import ActivityTimeouts
from streamproc.semantics.durations import MAX_DURATION
from streamproc.semantics.retry import RetryPolicy

__all__ = ["ceil_ms", "whole_ms", "duration_from_ms", "retry_policy_record", "to_datetime", "to_ms", "policy_to_record", "policy_from_record",
           "timeouts_to_record", "timeouts_from_record"]


#: Made once: the engine converts several durations per command.
_ONE_MS = timedelta(milliseconds=1)


def whole_ms(value: timedelta) -> int:
    """`value // timedelta(milliseconds=1)` from its normalized parts (0 <= seconds < 86,400,
    0 <= microseconds < 10**6): the division goes through big-integer microseconds, and a
    workflow's start converts a handful of durations."""
    return value.days * 86_400_000 + value.seconds * 1000 + value.microseconds // 1000


def ceil_ms(value: timedelta) -> int:
    # Rounded up: a positive timeout under a millisecond must not become "none" (0).
    return value.days * 86_400_000 + value.seconds * 1000 + -(-value.microseconds // 1000)


def retry_policy_record(policy: RetryPolicy) -> dict[str, Any]:
    """The RetryPolicyRecord of `policy`."""
    return {"initial_interval_ms": ceil_ms(policy.initial_interval),
            "backoff_coefficient": float(policy.backoff_coefficient),
            "maximum_interval_ms": ceil_ms(policy.maximum_interval),
            "maximum_attempts": policy.maximum_attempts,
            "non_retryable_error_types": list(policy.non_retryable_error_types)}


_MAX_MS = MAX_DURATION // _ONE_MS


def duration_from_ms(ms: int) -> timedelta:
    """A duration a command carries in milliseconds. Any int64 is accepted: beyond 100 years
    either way it saturates there (Python's timedelta would overflow past 2**31 days), so a
    huge timeout is capped and a huge negative one refused as negative by the validation
    that follows, as Temporal does with its int64 nanoseconds."""
    ms = max(-_MAX_MS - 1, min(_MAX_MS + 1, ms))
    return _ONE_MS * ms if type(ms) is int else timedelta(milliseconds=ms)


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_datetime(ms: int) -> datetime:
    return EPOCH + (_ONE_MS * ms if type(ms) is int else timedelta(milliseconds=ms))


def to_ms(value: datetime | timedelta | None) -> int:
    if value is None:
        return 0
    if isinstance(value, datetime):
        value = value - EPOCH
    return value.days * 86_400_000 + value.seconds * 1000 + value.microseconds // 1000  # `whole_ms`


def policy_to_record(policy: RetryPolicy) -> dict[str, Any]:
    return {"initial_interval_ms": to_ms(policy.initial_interval),
            "backoff_coefficient": policy.backoff_coefficient,
            "maximum_interval_ms": to_ms(policy.maximum_interval),
            "maximum_attempts": policy.maximum_attempts,
            "non_retryable_error_types": list(policy.non_retryable_error_types)}


def policy_from_record(record: dict[str, Any] | None) -> RetryPolicy:
    r = record or {}
    return RetryPolicy(initial_interval=duration_from_ms(r.get("initial_interval_ms", 0)),
                       backoff_coefficient=r.get("backoff_coefficient", 0.0),
                       maximum_interval=duration_from_ms(r.get("maximum_interval_ms", 0)),
                       maximum_attempts=r.get("maximum_attempts", 0),
                       non_retryable_error_types=tuple(r.get("non_retryable_error_types", ())))


def timeouts_to_record(t: ActivityTimeouts) -> dict[str, int]:
    return {"schedule_to_close_timeout_ms": to_ms(t.schedule_to_close),
            "schedule_to_start_timeout_ms": to_ms(t.schedule_to_start),
            "start_to_close_timeout_ms": to_ms(t.start_to_close),
            "heartbeat_timeout_ms": to_ms(t.heartbeat)}


def timeouts_from_record(r: dict[str, Any]) -> ActivityTimeouts:
    return ActivityTimeouts(*(duration_from_ms(r[f]) for f in (
        "schedule_to_close_timeout_ms", "schedule_to_start_timeout_ms",
        "start_to_close_timeout_ms", "heartbeat_timeout_ms")))
