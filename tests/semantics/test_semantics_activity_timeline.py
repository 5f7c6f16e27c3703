"""Timeline vectors of SEMANTICS.md 2.6, the real-server observations of section 13 and
the activity gotchas of section 11, played through the attempt state machine."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from streamproc.semantics import (
    NOT_ENOUGH_TIME_MESSAGE,
    ActivityCompleted,
    ActivityFailed,
    ActivityRetry,
    ActivityTimedOut,
    ActivityTimeouts,
    ApplicationFailure,
    AttemptPlan,
    RetryPolicy,
    RetryState,
    TimeoutFailure,
    TimeoutType,
    fail_attempt,
    fire_activity_timeout,
    next_activity_deadline,
    normalize_activity_retry_policy,
    normalize_activity_timeouts,
    record_heartbeat,
    run_activity_timeline,
    schedule_activity,
    start_attempt,
)
from tests.support.vector_times import S

T0 = datetime(2026, 5, 4, 12, 0, tzinfo=timezone.utc)
HANG = AttemptPlan()  # picked up at once, then never answers
STC_FAILURE = TimeoutFailure(
    message="activity StartToClose timeout", timeout_type=TimeoutType.START_TO_CLOSE
)


def activity(policy: RetryPolicy | None = None, **requested: timedelta):
    return schedule_activity(
        normalize_activity_retry_policy(policy),
        normalize_activity_timeouts(ActivityTimeouts(**requested)),
        T0,
    )


def offsets(*times: datetime | None) -> list[float | None]:
    return [None if t is None else (t - T0).total_seconds() for t in times]


# --- 2.6 ---------------------------------------------------------------------------


def test_AV1_schedule_to_close_ends_retries_of_hanging_attempts() -> None:
    timeline = run_activity_timeline(
        activity(schedule_to_close=60 * S, start_to_close=10 * S), [HANG]
    )
    rows = [
        (r.attempt, *offsets(r.started_time, r.ended_time), r.retry_delay, *offsets(r.next_due))
        for r in timeline.attempts
    ]
    assert rows == [
        (1, 0.0, 10.0, 1 * S, 11.0),
        (2, 11.0, 21.0, 2 * S, 23.0),
        (3, 23.0, 33.0, 4 * S, 37.0),
        (4, 37.0, 47.0, 8 * S, 55.0),
        (5, 55.0, 60.0, None, None),
    ]
    assert all(r.failure == STC_FAILURE for r in timeline.attempts[:4])
    outcome = timeline.outcome
    assert isinstance(outcome, ActivityTimedOut)
    # ActivityTaskStarted(attempt=5, last_failure=a4's StC timeout) ...
    assert outcome.attempt_started and outcome.attempt == 5
    assert outcome.last_failure == STC_FAILURE
    # ... then ActivityTaskTimedOut(SCHEDULE_TO_CLOSE, "Not enough time ...", TIMEOUT).
    assert outcome.retry_state is RetryState.TIMEOUT
    assert outcome.failure.timeout_type is TimeoutType.SCHEDULE_TO_CLOSE
    assert outcome.failure.message == NOT_ENOUGH_TIME_MESSAGE
    assert outcome.failure.cause == STC_FAILURE


def test_AV4_missed_heartbeat_fires_and_is_retried() -> None:
    heartbeating = AttemptPlan(heartbeats_after=(2 * S, 4 * S))
    timeline = run_activity_timeline(
        activity(start_to_close=10 * S, heartbeat=3 * S),
        [heartbeating, AttemptPlan(finishes_after=timedelta(0))],
    )
    first = timeline.attempts[0]
    assert offsets(first.started_time, first.ended_time) == [0.0, 7.0]
    assert first.failure == TimeoutFailure(
        message="activity Heartbeat timeout", timeout_type=TimeoutType.HEARTBEAT
    )
    assert (first.retry_delay, *offsets(first.next_due)) == (1 * S, 8.0)
    assert timeline.outcome == ActivityCompleted(attempt=2, last_failure=first.failure)


def test_AV5_schedule_to_start_is_not_retried() -> None:
    nobody_polls = AttemptPlan(pickup_after=None)
    timeline = run_activity_timeline(
        activity(schedule_to_start=5 * S, start_to_close=10 * S), [nobody_polls]
    )
    outcome = timeline.outcome
    assert isinstance(outcome, ActivityTimedOut)
    assert offsets(timeline.attempts[0].ended_time) == [5.0]
    assert (outcome.retry_state, outcome.failure.timeout_type, outcome.failure.message) == (
        RetryState.TIMEOUT,
        TimeoutType.SCHEDULE_TO_START,
        "activity ScheduleToStart timeout",
    )
    assert outcome.attempt == 1 and not outcome.attempt_started
    assert len(timeline.attempts) == 1


def test_AV6_start_to_close_with_two_attempts() -> None:
    timeline = run_activity_timeline(
        activity(RetryPolicy(maximum_attempts=2), start_to_close=10 * S), [HANG]
    )
    assert [offsets(r.ended_time, r.next_due) for r in timeline.attempts] == [
        [10.0, 11.0],
        [21.0, None],
    ]
    outcome = timeline.outcome
    assert isinstance(outcome, ActivityTimedOut)
    assert (outcome.retry_state, outcome.failure.timeout_type, outcome.failure.message) == (
        RetryState.MAXIMUM_ATTEMPTS_REACHED,
        TimeoutType.START_TO_CLOSE,
        "activity StartToClose timeout",
    )
    assert outcome.failure.cause == STC_FAILURE


# --- section 13: observed on a real server ------------------------------------------


def test_observed_gaps_with_maximum_interval_four_seconds() -> None:
    crash = ApplicationFailure(message="boom", type="ToolCrash")
    fails_at_once = AttemptPlan(finishes_after=timedelta(0), failure=crash)
    policy = RetryPolicy(
        initial_interval=1 * S, backoff_coefficient=2.0, maximum_interval=4 * S, maximum_attempts=5
    )
    timeline = run_activity_timeline(activity(policy, start_to_close=10 * S), [fails_at_once])
    starts = [r.started_time for r in timeline.attempts]
    assert [(b - a).total_seconds() for a, b in zip(starts, starts[1:])] == [1.0, 2.0, 4.0, 4.0]
    assert timeline.outcome == ActivityFailed(
        failure=crash,
        retry_state=RetryState.MAXIMUM_ATTEMPTS_REACHED,
        attempt=5,
        last_failure=crash,
    )


def test_observed_attempt_two_starts_two_seconds_after_attempt_one() -> None:
    timeline = run_activity_timeline(
        activity(RetryPolicy(maximum_attempts=2), start_to_close=1 * S), [HANG]
    )
    first, second = timeline.attempts
    assert second.started_time - first.started_time == 2 * S


def test_observed_schedule_to_close_gives_up_at_failure_time() -> None:
    crash = ApplicationFailure(message="tool crashed", type="ToolCrash")
    policy = RetryPolicy(initial_interval=timedelta(milliseconds=500), backoff_coefficient=1.0)
    plan = AttemptPlan(finishes_after=timedelta(milliseconds=600), failure=crash)
    timeline = run_activity_timeline(activity(policy, schedule_to_close=3 * S), [plan])
    # Attempts fail at 0.6, 1.7 and 2.8 s; the retry after 2.8 s would be due at 3.3 s.
    assert offsets(*(r.ended_time for r in timeline.attempts)) == [0.6, 1.7, 2.8]
    assert timeline.outcome == ActivityFailed(
        failure=crash, retry_state=RetryState.TIMEOUT, attempt=3, last_failure=crash
    )


def test_observed_schedule_to_close_deadline_arriving_first() -> None:
    crash = ApplicationFailure(message="tool crashed", type="ToolCrash")
    policy = RetryPolicy(initial_interval=timedelta(milliseconds=500), backoff_coefficient=1.0)
    plan = AttemptPlan(finishes_after=timedelta(milliseconds=500), failure=crash)
    timeline = run_activity_timeline(activity(policy, schedule_to_close=3 * S), [plan])
    # Attempt 3 fails at 2.5 s; attempt 4 is due exactly at the 3 s deadline, which
    # fires before a worker can start it.
    assert offsets(*(r.next_due for r in timeline.attempts[:3])) == [1.0, 2.0, 3.0]
    outcome = timeline.outcome
    assert isinstance(outcome, ActivityTimedOut)
    assert (outcome.attempt, outcome.attempt_started) == (4, False)
    assert outcome.failure.timeout_type is TimeoutType.SCHEDULE_TO_CLOSE
    assert outcome.failure.message == NOT_ENOUGH_TIME_MESSAGE
    assert outcome.failure.cause == crash


def test_observed_success_after_one_start_to_close_timeout() -> None:
    timeline = run_activity_timeline(
        activity(start_to_close=1 * S), [HANG, AttemptPlan(finishes_after=timedelta(0))]
    )
    assert timeline.outcome == ActivityCompleted(attempt=2, last_failure=STC_FAILURE)


# --- section 11 gotchas and stale timers --------------------------------------------


def test_heartbeat_timeout_without_time_left_reports_schedule_to_close() -> None:
    timeline = run_activity_timeline(
        activity(schedule_to_close=5 * S, start_to_close=5 * S, heartbeat=4.5 * S), [HANG]
    )
    outcome = timeline.outcome
    assert isinstance(outcome, ActivityTimedOut)
    # The heartbeat fires at 4.5 s; a 1 s backoff would end at 5.5 s > 5 s.
    assert offsets(timeline.attempts[0].ended_time) == [4.5]
    assert outcome.failure.timeout_type is TimeoutType.SCHEDULE_TO_CLOSE
    assert outcome.failure.cause is None  # first attempt: no previous failure


def test_activity_retries_forever_without_policy_or_deadline() -> None:
    timeline = run_activity_timeline(
        activity(start_to_close=1 * S), [HANG] * 30 + [AttemptPlan(finishes_after=timedelta(0))]
    )
    assert timeline.outcome == ActivityCompleted(attempt=31, last_failure=STC_FAILURE)
    assert {r.retry_delay for r in timeline.attempts[7:30]} == {100 * S}


def test_stale_timer_of_earlier_attempt_is_ignored() -> None:
    state = start_attempt(activity(schedule_to_close=60 * S, start_to_close=10 * S), T0)
    retry = fire_activity_timeout(state, TimeoutType.START_TO_CLOSE, T0 + 10 * S, attempt=1)
    assert isinstance(retry, ActivityRetry)
    second = start_attempt(retry.state, T0 + 11 * S)
    assert fire_activity_timeout(second, TimeoutType.START_TO_CLOSE, T0 + 30 * S, attempt=1) is None
    assert fire_activity_timeout(second, TimeoutType.START_TO_CLOSE, T0 + 20 * S) is None  # early
    closed = fire_activity_timeout(second, TimeoutType.SCHEDULE_TO_CLOSE, T0 + 60 * S, attempt=1)
    assert isinstance(closed, ActivityTimedOut)


def test_heartbeat_timer_superseded_by_a_later_heartbeat_is_ignored() -> None:
    state = start_attempt(activity(start_to_close=10 * S, heartbeat=3 * S), T0)
    assert next_activity_deadline(state).at == T0 + 3 * S
    state = record_heartbeat(state, T0 + 2 * S, details=b"progress")
    assert fire_activity_timeout(state, TimeoutType.HEARTBEAT, T0 + 3 * S) is None
    retry = fire_activity_timeout(state, TimeoutType.HEARTBEAT, T0 + 5 * S)
    assert isinstance(retry, ActivityRetry)
    assert retry.state.last_heartbeat_details == b"progress"  # delivered to the next attempt


def test_failure_while_cancel_requested_does_not_retry() -> None:
    from dataclasses import replace

    state = replace(start_attempt(activity(start_to_close=10 * S), T0), cancel_requested=True)
    outcome = fail_attempt(state, ApplicationFailure(type="Boom"), T0 + 1 * S)
    assert isinstance(outcome, ActivityFailed)
    assert outcome.retry_state is RetryState.CANCEL_REQUESTED


def test_timers_after_run_expiration_leave_activity_pending() -> None:
    timeline = run_activity_timeline(
        activity(start_to_close=10 * S), [HANG], run_expiration=T0 + 25 * S
    )
    assert timeline.outcome is None
    assert len(timeline.attempts) == 2  # StC at 10 s and 21 s; the next one (33 s) is never created
    assert timeline.final_state.attempt == 3


@pytest.mark.parametrize("misuse", ["start-twice", "start-early", "heartbeat-unstarted"])
def test_transitions_reject_impossible_orders(misuse: str) -> None:
    state = activity(start_to_close=10 * S)
    with pytest.raises(ValueError):
        if misuse == "start-twice":
            start_attempt(start_attempt(state, T0), T0)
        elif misuse == "start-early":
            start_attempt(state, T0 - 1 * S)
        else:
            record_heartbeat(state, T0)
