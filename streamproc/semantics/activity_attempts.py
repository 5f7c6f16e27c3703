"""The life of one activity across its attempts, as pure state transitions.

An :class:`ActivityState` is what the engine keeps for a pending activity. Each
transition takes the state and the time and returns a new state or an outcome:

* :func:`start_attempt`, :func:`record_heartbeat`: a worker picked the task up, or
  heartbeated;
* :func:`fire_activity_timeout`: a timer from :func:`next_activity_deadline` fell due;
* :func:`fail_attempt`, :func:`complete_attempt`: the worker reported a result.

A retry is an :class:`ActivityRetry` holding the next attempt's state; it writes no
history event. Anything else closes the activity, and the outcome says which events to
write (an ``ActivityTaskStarted`` carrying the final attempt number and last failure,
written only now and only if the attempt had started, then the close event).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from streamproc.semantics.activity_timeouts import (
    ActivityDeadline,
    ActivityTimeouts,
    activity_deadlines,
    activity_timeout_failure,
    retry_expiration,
    timed_out_event_failure,
)
from streamproc.semantics.enums import RetryState, TimeoutType
from streamproc.semantics.failures import Failure, TimeoutFailure
from streamproc.semantics.retry import RetryPolicy, activity_retry_decision

__all__ = [
    "ActivityState",
    "ActivityRetry",
    "ActivityCompleted",
    "ActivityFailed",
    "ActivityTimedOut",
    "ActivityOutcome",
    "schedule_activity",
    "start_attempt",
    "record_heartbeat",
    "next_activity_deadline",
    "fire_activity_timeout",
    "fail_attempt",
    "complete_attempt",
]


@dataclass(frozen=True)
class ActivityState:
    """A pending activity.

    ``retry_policy`` and ``timeouts`` are the normalised values recorded on
    ``ActivityTaskScheduled``. ``scheduled_time`` is when the current attempt became
    (or, during a retry backoff, will become) due; ``first_scheduled_time`` never
    changes. ``last_failure`` is the failure of the previous, retried attempt.
    Heartbeat details survive retries so the next attempt can resume from them.
    """

    retry_policy: RetryPolicy
    timeouts: ActivityTimeouts
    first_scheduled_time: datetime
    scheduled_time: datetime
    attempt: int = 1
    started_time: datetime | None = None
    last_heartbeat_time: datetime | None = None
    last_heartbeat_details: Any = None
    last_failure: Failure | None = None
    cancel_requested: bool = False

    @property
    def retry_expiration(self) -> datetime | None:
        """No retry may become due after this instant (schedule-to-close)."""
        return retry_expiration(self.first_scheduled_time, self.timeouts.schedule_to_close)


@dataclass(frozen=True)
class ActivityRetry:
    """The attempt failed and another one is due at ``state.scheduled_time``."""

    state: ActivityState
    delay: timedelta
    failure: Failure


@dataclass(frozen=True)
class ActivityCompleted:
    """``ActivityTaskStarted`` then ``ActivityTaskCompleted``."""

    attempt: int
    last_failure: Failure | None


@dataclass(frozen=True)
class ActivityFailed:
    """``ActivityTaskStarted`` then ``ActivityTaskFailed``; ``failure`` is the worker's,
    unchanged."""

    failure: Failure
    retry_state: RetryState
    attempt: int
    last_failure: Failure | None


@dataclass(frozen=True)
class ActivityTimedOut:
    """``ActivityTaskTimedOut``, preceded by ``ActivityTaskStarted`` only when
    ``attempt_started`` (a schedule-to-start timeout, or schedule-to-close during a
    backoff, ends an attempt no worker ever picked up)."""

    failure: TimeoutFailure
    retry_state: RetryState
    attempt: int
    last_failure: Failure | None
    attempt_started: bool


ActivityOutcome = ActivityCompleted | ActivityFailed | ActivityTimedOut


def schedule_activity(
    retry_policy: RetryPolicy, timeouts: ActivityTimeouts, scheduled_time: datetime
) -> ActivityState:
    """A new activity; pass the *normalised* policy and timeouts."""
    return ActivityState(
        retry_policy=retry_policy,
        timeouts=timeouts,
        first_scheduled_time=scheduled_time,
        scheduled_time=scheduled_time,
    )


def start_attempt(state: ActivityState, now: datetime) -> ActivityState:
    """A worker picked up the current attempt at ``now``."""
    if state.started_time is not None:
        raise ValueError(f"attempt {state.attempt} already started at {state.started_time}")
    if now < state.scheduled_time:
        raise ValueError(
            f"attempt {state.attempt} is not due until {state.scheduled_time}, got {now}"
        )
    return replace(state, started_time=now)


def record_heartbeat(state: ActivityState, now: datetime, details: Any = None) -> ActivityState:
    """The worker heartbeated; only the heartbeat deadline moves."""
    if state.started_time is None:
        raise ValueError(f"attempt {state.attempt} has not started; cannot heartbeat")
    return replace(state, last_heartbeat_time=now, last_heartbeat_details=details)


def next_activity_deadline(
    state: ActivityState, run_expiration: datetime | None = None
) -> ActivityDeadline | None:
    """The earliest pending timeout, or ``None`` (no timer to create)."""
    deadlines = activity_deadlines(
        state.timeouts,
        first_scheduled_time=state.first_scheduled_time,
        scheduled_time=state.scheduled_time,
        started_time=state.started_time,
        last_heartbeat_time=state.last_heartbeat_time,
        run_expiration=run_expiration,
    )
    return deadlines[0] if deadlines else None


def fire_activity_timeout(
    state: ActivityState,
    timeout_type: TimeoutType,
    now: datetime,
    *,
    attempt: int | None = None,
) -> ActivityRetry | ActivityTimedOut | None:
    """Apply a timer of ``timeout_type`` (created for ``attempt``) firing at ``now``.

    Returns ``None`` when the timer is stale and must be ignored: it belongs to an
    earlier attempt (schedule-to-close spans attempts, so it is never stale that way),
    or the deadline is not reached in the current state (e.g. a heartbeat moved it).
    """
    if attempt is not None and attempt != state.attempt:
        if timeout_type is not TimeoutType.SCHEDULE_TO_CLOSE:
            return None
    due = [
        d
        for d in activity_deadlines(
            state.timeouts,
            first_scheduled_time=state.first_scheduled_time,
            scheduled_time=state.scheduled_time,
            started_time=state.started_time,
            last_heartbeat_time=state.last_heartbeat_time,
        )
        if d.timeout_type == timeout_type and d.at <= now
    ]
    if not due:
        return None
    failure = activity_timeout_failure(timeout_type)
    decision = _retry_decision(state, failure, now)
    if decision.delay is not None:
        return _retry(state, failure, decision.delay, now)
    return ActivityTimedOut(
        failure=timed_out_event_failure(
            timeout_type,
            decision.retry_state,
            last_failure=state.last_failure,
            last_heartbeat_details=state.last_heartbeat_details,
        ),
        retry_state=decision.retry_state,
        attempt=state.attempt,
        last_failure=state.last_failure,
        attempt_started=state.started_time is not None,
    )


def fail_attempt(
    state: ActivityState, failure: Failure, now: datetime
) -> ActivityRetry | ActivityFailed:
    """The worker reported ``failure`` for the current attempt at ``now``."""
    if state.started_time is None:
        raise ValueError(f"attempt {state.attempt} has not started; cannot fail it")
    decision = _retry_decision(state, failure, now)
    if decision.delay is not None:
        return _retry(state, failure, decision.delay, now)
    return ActivityFailed(
        failure=failure,
        retry_state=decision.retry_state,
        attempt=state.attempt,
        last_failure=state.last_failure,
    )


def complete_attempt(state: ActivityState, now: datetime) -> ActivityCompleted:
    """The worker reported success for the current attempt at ``now``."""
    if state.started_time is None:
        raise ValueError(f"attempt {state.attempt} has not started; cannot complete it")
    return ActivityCompleted(attempt=state.attempt, last_failure=state.last_failure)


def _retry_decision(state: ActivityState, failure: Failure, now: datetime):
    """Whether the attempt that ended with `failure` at `now` is retried (the retry policy,
    the activity's retry expiration, a cancel request)."""
    return activity_retry_decision(state.retry_policy, attempt=state.attempt, failure=failure, now=now,
                                   expiration=state.retry_expiration, cancel_requested=state.cancel_requested)


def _retry(
    state: ActivityState, failure: Failure, delay: timedelta, now: datetime
) -> ActivityRetry:
    next_state = replace(
        state,
        attempt=state.attempt + 1,
        scheduled_time=now + delay,
        started_time=None,
        last_heartbeat_time=None,
        last_failure=failure,
    )
    return ActivityRetry(state=next_state, delay=delay, failure=failure)
