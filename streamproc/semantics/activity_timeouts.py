"""Activity timeouts: normalisation, deadlines, heartbeats and timeout failures.

The four timeouts (SEMANTICS.md 2.1), with ``0`` meaning "none":

* ``schedule_to_start``: from the current attempt's scheduled time (for a retry, the
  time it became due) until a worker picks it up. Per attempt; never retried.
* ``start_to_close``: from the current attempt's start. Per attempt; retried.
* ``heartbeat``: from the later of the attempt's start and its last heartbeat. Per
  attempt; retried.
* ``schedule_to_close``: from the *first* scheduled time, across all attempts; never
  retried. It is also the retry deadline.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from streamproc.semantics.durations import ZERO, validate_and_cap
from streamproc.semantics.enums import RetryState, TimeoutType
from streamproc.semantics.errors import InvalidArgument
from streamproc.semantics.failures import Failure, TimeoutFailure

__all__ = [
    "NOT_ENOUGH_TIME_MESSAGE",
    "ActivityTimeouts",
    "ActivityDeadline",
    "normalize_activity_timeouts",
    "retry_expiration",
    "heartbeat_deadline",
    "activity_deadlines",
    "activity_timeout_failure",
    "timed_out_event_failure",
]

#: Message of the SCHEDULE_TO_CLOSE failure that replaces a timeout when no time is
#: left for another attempt.
NOT_ENOUGH_TIME_MESSAGE = (
    "Not enough time to schedule next retry before activity ScheduleToClose timeout,"
    " giving up retrying"
)


@dataclass(frozen=True)
class ActivityTimeouts:
    """The four activity timeouts; ``timedelta(0)`` means unset / no limit.

    Built by hand this is what a ``ScheduleActivityTask`` command asked for; returned by
    :func:`normalize_activity_timeouts` it is what ``ActivityTaskScheduled`` records.
    """

    schedule_to_close: timedelta = ZERO
    schedule_to_start: timedelta = ZERO
    start_to_close: timedelta = ZERO
    heartbeat: timedelta = ZERO


@dataclass(frozen=True, order=True)
class ActivityDeadline:
    """A timeout falling due at ``at``.

    Deadlines order by time, then by timeout type number, which is how the server
    breaks ties: at the same instant START_TO_CLOSE fires before HEARTBEAT, and
    SCHEDULE_TO_START before SCHEDULE_TO_CLOSE.
    """

    at: datetime
    timeout_type: TimeoutType


def normalize_activity_timeouts(
    requested: ActivityTimeouts,
    *,
    run_timeout: timedelta = ZERO,
    activity_id: str = "",
    activity_type: str = "",
) -> ActivityTimeouts:
    """Validate and fill in an activity's timeouts when it is scheduled.

    ``run_timeout`` is the workflow run timeout (zero for none). In order:

    1. each timeout must be non-negative; each is capped at 100 years;
    2. with a schedule-to-close timeout, schedule-to-start and start-to-close default
       to it and may not exceed it;
    3. otherwise, with a start-to-close timeout, schedule-to-close becomes the run
       timeout (possibly none), and so does an unset schedule-to-start;
    4. otherwise the activity is rejected;
    5. with a run timeout, no timeout may exceed it;
    6. the heartbeat timeout may not exceed start-to-close.

    Raises :class:`InvalidArgument` with the server's message.
    """
    schedule_to_close = validate_and_cap(
        requested.schedule_to_close, "invalid ScheduleToCloseTimeout"
    )
    schedule_to_start = validate_and_cap(
        requested.schedule_to_start, "invalid ScheduleToStartTimeout"
    )
    start_to_close = validate_and_cap(requested.start_to_close, "invalid StartToCloseTimeout")
    heartbeat = validate_and_cap(requested.heartbeat, "invalid HeartbeatTimeout")
    run_timeout = max(run_timeout, ZERO)

    if schedule_to_close > ZERO:
        schedule_to_start = (
            min(schedule_to_start, schedule_to_close)
            if schedule_to_start > ZERO
            else schedule_to_close
        )
        start_to_close = (
            min(start_to_close, schedule_to_close) if start_to_close > ZERO else schedule_to_close
        )
    elif start_to_close > ZERO:
        schedule_to_close = run_timeout
        if schedule_to_start == ZERO:
            schedule_to_start = run_timeout
    else:
        raise InvalidArgument(
            "a valid StartToCloseTimeout or ScheduleToCloseTimeout must be set on the"
            f" activity. ActivityId={activity_id} ActivityType={activity_type}"
        )

    if run_timeout > ZERO:
        schedule_to_close = min(schedule_to_close, run_timeout)
        schedule_to_start = min(schedule_to_start, run_timeout)
        start_to_close = min(start_to_close, run_timeout)
        heartbeat = min(heartbeat, run_timeout)

    return ActivityTimeouts(
        schedule_to_close=schedule_to_close,
        schedule_to_start=schedule_to_start,
        start_to_close=start_to_close,
        heartbeat=min(heartbeat, start_to_close),
    )


def retry_expiration(
    first_scheduled_time: datetime, schedule_to_close: timedelta
) -> datetime | None:
    """The retry deadline: first scheduled time plus schedule-to-close, if any."""
    if schedule_to_close <= ZERO:
        return None
    return first_scheduled_time + schedule_to_close


def heartbeat_deadline(
    *,
    started_time: datetime,
    last_heartbeat_time: datetime | None,
    heartbeat_timeout: timedelta,
) -> datetime | None:
    """When a started attempt times out for lack of heartbeats (``None``: never).

    The clock runs from the later of the start and the last heartbeat. A heartbeat
    moves only this deadline; start-to-close and schedule-to-close are unaffected.
    """
    if heartbeat_timeout <= ZERO:
        return None
    last = started_time
    if last_heartbeat_time is not None and last_heartbeat_time > last:
        last = last_heartbeat_time
    return last + heartbeat_timeout


def activity_deadlines(
    timeouts: ActivityTimeouts,
    *,
    first_scheduled_time: datetime,
    scheduled_time: datetime,
    started_time: datetime | None = None,
    last_heartbeat_time: datetime | None = None,
    run_expiration: datetime | None = None,
) -> tuple[ActivityDeadline, ...]:
    """The pending timeouts of the current attempt, earliest first.

    ``scheduled_time`` is when the current attempt became (or becomes) due and
    ``started_time`` is set once a worker picked it up. Schedule-to-start applies only
    before the start, start-to-close and heartbeat only after it. Deadlines after
    ``run_expiration`` are left out: the run times out first and abandons the activity.
    """
    deadlines: list[ActivityDeadline] = []
    if timeouts.schedule_to_close > ZERO:
        deadlines.append(
            ActivityDeadline(
                first_scheduled_time + timeouts.schedule_to_close,
                TimeoutType.SCHEDULE_TO_CLOSE,
            )
        )
    if started_time is None:
        if timeouts.schedule_to_start > ZERO:
            deadlines.append(
                ActivityDeadline(
                    scheduled_time + timeouts.schedule_to_start, TimeoutType.SCHEDULE_TO_START
                )
            )
    else:
        if timeouts.start_to_close > ZERO:
            deadlines.append(
                ActivityDeadline(
                    started_time + timeouts.start_to_close, TimeoutType.START_TO_CLOSE
                )
            )
        beat = heartbeat_deadline(
            started_time=started_time,
            last_heartbeat_time=last_heartbeat_time,
            heartbeat_timeout=timeouts.heartbeat,
        )
        if beat is not None:
            deadlines.append(ActivityDeadline(beat, TimeoutType.HEARTBEAT))
    if run_expiration is not None:
        deadlines = [d for d in deadlines if d.at <= run_expiration]
    return tuple(sorted(deadlines))


def activity_timeout_failure(timeout_type: TimeoutType) -> TimeoutFailure:
    """The failure the server builds when an activity timer fires, e.g.
    ``activity StartToClose timeout``. It is what the retry decision sees and, if the
    attempt is retried, what the next attempt carries as its last failure."""
    return TimeoutFailure(
        message=f"activity {timeout_type.short_name} timeout", timeout_type=timeout_type
    )


def timed_out_event_failure(
    fired: TimeoutType,
    retry_state: RetryState,
    *,
    last_failure: Failure | None = None,
    last_heartbeat_details: Any = None,
) -> TimeoutFailure:
    """The failure written on ``ActivityTaskTimedOut`` when a timer ends the activity.

    If the activity stopped with ``TIMEOUT`` and the timer was not schedule-to-start
    (a start-to-close or heartbeat timeout with no time left for another attempt, or
    schedule-to-close itself), the workflow is told SCHEDULE_TO_CLOSE with
    :data:`NOT_ENOUGH_TIME_MESSAGE`. Otherwise it sees the timer that fired.
    ``last_failure`` (the previous retried attempt's failure) becomes the cause.
    """
    if retry_state is RetryState.TIMEOUT and fired is not TimeoutType.SCHEDULE_TO_START:
        message, timeout_type = NOT_ENOUGH_TIME_MESSAGE, TimeoutType.SCHEDULE_TO_CLOSE
    else:
        message, timeout_type = f"activity {fired.short_name} timeout", fired
    return TimeoutFailure(
        message=message,
        timeout_type=timeout_type,
        cause=last_failure,
        last_heartbeat_details=last_heartbeat_details,
    )
