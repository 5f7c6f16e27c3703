"""Amazon SWF timeouts and their Temporal equivalents (SEMANTICS.md 9).

SWF writes every timeout as a string: a whole number of seconds (at most 8 digits) or
``NONE``. Temporal writes "no limit" as zero. SWF never retries by itself, so an SWF
activity maps to a Temporal activity with ``maximum_attempts=1``.
"""

from __future__ import annotations

from datetime import timedelta

from streamproc.semantics.activity_timeouts import ActivityTimeouts
from streamproc.semantics.durations import ZERO
from streamproc.semantics.enums import TimeoutType
from streamproc.semantics.errors import InvalidArgument
from streamproc.semantics.retry import RetryPolicy

__all__ = [
    "SWF_NONE",
    "SWF_MAXIMUM_DURATION",
    "SWF_ACTIVITY_RETRY_POLICY",
    "parse_swf_timeout",
    "format_swf_timeout",
    "swf_timeout_to_temporal",
    "swf_activity_timeouts",
    "swf_workflow_run_timeout",
    "timeout_type_from_swf",
    "timeout_type_to_swf",
]

SWF_NONE = "NONE"

#: SWF's hard limit on any workflow or activity, even one whose timeouts are NONE.
SWF_MAXIMUM_DURATION = timedelta(days=365)

#: SWF leaves retries to the decider; the server must not retry on its own.
SWF_ACTIVITY_RETRY_POLICY = RetryPolicy(maximum_attempts=1)

_MAX_DIGITS = 8

_SWF_ACTIVITY_TIMEOUT_TYPES = {
    "START_TO_CLOSE": TimeoutType.START_TO_CLOSE,
    "SCHEDULE_TO_START": TimeoutType.SCHEDULE_TO_START,
    "SCHEDULE_TO_CLOSE": TimeoutType.SCHEDULE_TO_CLOSE,
    "HEARTBEAT": TimeoutType.HEARTBEAT,
}


def parse_swf_timeout(value: str, *, field: str = "timeout") -> timedelta | None:
    """Parse an SWF timeout string; ``None`` for ``NONE``.

    Values above one year are returned as given: whether SWF rejects or clamps them
    is not confirmed.
    """
    if value == SWF_NONE:
        return None
    if not (value.isascii() and value.isdigit() and len(value) <= _MAX_DIGITS):
        raise InvalidArgument(
            f"{field} must be a whole number of seconds of at most {_MAX_DIGITS} digits"
            f" or {SWF_NONE}, got {value!r}"
        )
    return timedelta(seconds=int(value))


def format_swf_timeout(value: timedelta | None, *, field: str = "timeout") -> str:
    """The SWF string for ``value``; ``None`` becomes ``NONE``."""
    if value is None:
        return SWF_NONE
    seconds, remainder = divmod(value, timedelta(seconds=1))
    if remainder or seconds < 0 or len(str(seconds)) > _MAX_DIGITS:
        raise InvalidArgument(
            f"{field} must be a whole, non-negative number of seconds of at most"
            f" {_MAX_DIGITS} digits to be written for SWF, got {value}"
        )
    return str(seconds)


def swf_timeout_to_temporal(value: str, *, field: str = "timeout") -> timedelta:
    """The Temporal duration for an SWF timeout string: ``NONE`` becomes zero (no limit).

    A literal ``"0"`` is refused: in SWF it is a zero-second timeout, while in
    Temporal zero means no limit, so no Temporal value says the same thing.
    """
    parsed = parse_swf_timeout(value, field=field)
    if parsed is None:
        return ZERO
    if parsed == ZERO:
        raise InvalidArgument(
            f"{field} of 0 seconds has no Temporal equivalent (0 means no limit there);"
            f" use {SWF_NONE} or a positive number of seconds"
        )
    return parsed


def swf_activity_timeouts(
    *,
    schedule_to_start: str | None,
    schedule_to_close: str | None,
    start_to_close: str | None,
    heartbeat: str | None = None,
) -> ActivityTimeouts:
    """Requested Temporal timeouts for an SWF ``ScheduleActivityTask`` decision.

    Each argument is the decision's value, or else the activity type's registered
    default, or ``None`` if neither exists. The first three are mandatory in SWF; the
    heartbeat timeout is optional. Schedule with :data:`SWF_ACTIVITY_RETRY_POLICY` and
    normalise the result like any other activity.

    If both schedule-to-close and start-to-close are ``NONE``, schedule-to-close is set
    to :data:`SWF_MAXIMUM_DURATION`: that is SWF's effective limit, and Temporal
    refuses an activity with neither.
    """
    required = (
        ("scheduleToStartTimeout", schedule_to_start, "DEFAULT_SCHEDULE_TO_START_TIMEOUT_UNDEFINED"),
        ("scheduleToCloseTimeout", schedule_to_close, "DEFAULT_SCHEDULE_TO_CLOSE_TIMEOUT_UNDEFINED"),
        ("startToCloseTimeout", start_to_close, "DEFAULT_START_TO_CLOSE_TIMEOUT_UNDEFINED"),
    )
    for name, value, cause in required:
        if value is None:
            raise InvalidArgument(
                f"{name} is set neither in the decision nor as the activity type's"
                f" registered default ({cause})"
            )
    assert schedule_to_start is not None and schedule_to_close is not None
    assert start_to_close is not None
    timeouts = ActivityTimeouts(
        schedule_to_start=swf_timeout_to_temporal(
            schedule_to_start, field="scheduleToStartTimeout"
        ),
        schedule_to_close=swf_timeout_to_temporal(
            schedule_to_close, field="scheduleToCloseTimeout"
        ),
        start_to_close=swf_timeout_to_temporal(start_to_close, field="startToCloseTimeout"),
        heartbeat=ZERO
        if heartbeat is None
        else swf_timeout_to_temporal(heartbeat, field="heartbeatTimeout"),
    )
    if timeouts.schedule_to_close == ZERO and timeouts.start_to_close == ZERO:
        return ActivityTimeouts(
            schedule_to_start=timeouts.schedule_to_start,
            schedule_to_close=SWF_MAXIMUM_DURATION,
            start_to_close=ZERO,
            heartbeat=timeouts.heartbeat,
        )
    return timeouts


def swf_workflow_run_timeout(execution_start_to_close: str | None) -> timedelta:
    """The Temporal run timeout for SWF's ``executionStartToCloseTimeout``.

    SWF requires it (from the start request or the registered default) and does not
    accept ``NONE``.
    """
    field = "executionStartToCloseTimeout"
    if execution_start_to_close is None:
        raise InvalidArgument(
            f"{field} is set neither in the start request nor as the workflow type's"
            " registered default"
        )
    if execution_start_to_close == SWF_NONE:
        raise InvalidArgument(f"{field} cannot be {SWF_NONE}")
    return swf_timeout_to_temporal(execution_start_to_close, field=field)


def timeout_type_from_swf(name: str) -> TimeoutType:
    """Map an SWF ``ActivityTaskTimeoutType`` (or decision/workflow timeout type)."""
    try:
        return _SWF_ACTIVITY_TIMEOUT_TYPES[name]
    except KeyError:
        allowed = ", ".join(_SWF_ACTIVITY_TIMEOUT_TYPES)
        raise InvalidArgument(
            f"unknown SWF timeout type {name!r}; expected one of {allowed}"
        ) from None


def timeout_type_to_swf(timeout_type: TimeoutType) -> str:
    """The SWF spelling of a Temporal timeout type (same words, no prefix)."""
    if timeout_type is TimeoutType.UNSPECIFIED:
        raise ValueError("TimeoutType.UNSPECIFIED has no SWF equivalent")
    return timeout_type.name
