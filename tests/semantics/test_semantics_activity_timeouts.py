"""Activity timeout normalisation (every vector of SEMANTICS.md 2.2), timeout failures
(2.3), heartbeats (2.4) and deadline ordering."""

from __future__ import annotations

from datetime import timedelta

import pytest

from streamproc.semantics import (
    NOT_ENOUGH_TIME_MESSAGE,
    ActivityDeadline,
    ActivityTimeouts,
    ApplicationFailure,
    InvalidArgument,
    RetryState,
    TimeoutType,
    activity_deadlines,
    activity_timeout_failure,
    heartbeat_deadline,
    normalize_activity_timeouts,
    retry_expiration,
    timed_out_event_failure,
)
from tests.support.vector_times import NONE, H, M, S, T


def timeouts(s2c=NONE, s2s=NONE, stc=NONE, hb=NONE) -> ActivityTimeouts:
    return ActivityTimeouts(
        schedule_to_close=s2c, schedule_to_start=s2s, start_to_close=stc, heartbeat=hb
    )


# --- 2.2 vectors --------------------------------------------------------------------

NORMALISATION_VECTORS = [
    ("AT2", timeouts(stc=10 * S), NONE, timeouts(stc=10 * S)),
    ("AT3", timeouts(s2c=60 * S), NONE, timeouts(60 * S, 60 * S, 60 * S)),
    ("AT4", timeouts(60 * S, 120 * S, 90 * S, 100 * S), NONE, timeouts(60 * S, 60 * S, 60 * S, 60 * S)),
    ("AT5", timeouts(stc=30 * M, hb=45 * M), 10 * M, timeouts(10 * M, 10 * M, 10 * M, 10 * M)),
    ("AT6", timeouts(s2c=1 * H, stc=5 * M, hb=30 * S), 20 * M, timeouts(20 * M, 20 * M, 5 * M, 30 * S)),
    ("AT7", timeouts(s2s=2 * M, stc=5 * M), NONE, timeouts(s2s=2 * M, stc=5 * M)),
    (
        "AT9",
        timeouts(stc=timedelta(days=200 * 365)),
        NONE,
        timeouts(stc=timedelta(seconds=3_153_600_000)),
    ),
]


@pytest.mark.parametrize(
    ("requested", "run_timeout", "expected"),
    [v[1:] for v in NORMALISATION_VECTORS],
    ids=[v[0] for v in NORMALISATION_VECTORS],
)
def test_normalisation_vectors(requested, run_timeout, expected) -> None:
    assert normalize_activity_timeouts(requested, run_timeout=run_timeout) == expected


def test_AT1_neither_start_to_close_nor_schedule_to_close_is_rejected() -> None:
    with pytest.raises(InvalidArgument) as info:
        normalize_activity_timeouts(timeouts(), activity_id="7", activity_type="Charge")
    assert str(info.value) == (
        "a valid StartToCloseTimeout or ScheduleToCloseTimeout must be set on the activity."
        " ActivityId=7 ActivityType=Charge"
    )


def test_AT8_negative_schedule_to_close_is_rejected() -> None:
    with pytest.raises(InvalidArgument) as info:
        normalize_activity_timeouts(timeouts(s2c=-1 * S, stc=10 * S))
    assert str(info.value) == "invalid ScheduleToCloseTimeout: negative duration"


@pytest.mark.parametrize(
    ("requested", "message"),
    [
        (timeouts(s2s=-1 * S, stc=10 * S), "invalid ScheduleToStartTimeout: negative duration"),
        (timeouts(stc=-1 * S), "invalid StartToCloseTimeout: negative duration"),
        (timeouts(stc=10 * S, hb=-1 * S), "invalid HeartbeatTimeout: negative duration"),
        # Checked in order: schedule-to-close first.
        (timeouts(s2c=-1 * S, s2s=-1 * S, stc=-1 * S, hb=-1 * S), "invalid ScheduleToCloseTimeout: negative duration"),
        # Negativity is checked before the "one of them must be set" rule.
        (timeouts(hb=-1 * S), "invalid HeartbeatTimeout: negative duration"),
    ],
    ids=["s2s", "stc", "hb", "order", "negative-before-missing"],
)
def test_negative_timeout_messages(requested, message) -> None:
    with pytest.raises(InvalidArgument) as info:
        normalize_activity_timeouts(requested)
    assert str(info.value) == message


def test_start_to_close_only_takes_run_timeout_as_schedule_timeouts() -> None:
    assert normalize_activity_timeouts(timeouts(stc=10 * S), run_timeout=30 * M) == timeouts(
        30 * M, 30 * M, 10 * S
    )


# --- 2.3 what the workflow sees -----------------------------------------------------


def test_timeout_type_numbers_and_names() -> None:
    assert [(t.name, int(t), t.short_name) for t in TimeoutType] == [
        ("UNSPECIFIED", 0, "Unspecified"),
        ("START_TO_CLOSE", 1, "StartToClose"),
        ("SCHEDULE_TO_START", 2, "ScheduleToStart"),
        ("SCHEDULE_TO_CLOSE", 3, "ScheduleToClose"),
        ("HEARTBEAT", 4, "Heartbeat"),
    ]
    assert TimeoutType.HEARTBEAT.proto_name == "TIMEOUT_TYPE_HEARTBEAT"


def test_retry_state_numbers() -> None:
    assert {s.proto_name: int(s) for s in RetryState} == {
        "RETRY_STATE_UNSPECIFIED": 0,
        "RETRY_STATE_IN_PROGRESS": 1,
        "RETRY_STATE_NON_RETRYABLE_FAILURE": 2,
        "RETRY_STATE_TIMEOUT": 3,
        "RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED": 4,
        "RETRY_STATE_RETRY_POLICY_NOT_SET": 5,
        "RETRY_STATE_INTERNAL_SERVER_ERROR": 6,
        "RETRY_STATE_CANCEL_REQUESTED": 7,
    }


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        (TimeoutType.START_TO_CLOSE, "activity StartToClose timeout"),
        (TimeoutType.SCHEDULE_TO_START, "activity ScheduleToStart timeout"),
        (TimeoutType.SCHEDULE_TO_CLOSE, "activity ScheduleToClose timeout"),
        (TimeoutType.HEARTBEAT, "activity Heartbeat timeout"),
    ],
)
def test_timer_failure_message(kind: TimeoutType, message: str) -> None:
    failure = activity_timeout_failure(kind)
    assert (failure.message, failure.timeout_type, failure.cause) == (message, kind, None)


@pytest.mark.parametrize(
    ("fired", "retry_state", "expected_type", "expected_message"),
    [
        (TimeoutType.START_TO_CLOSE, RetryState.TIMEOUT, TimeoutType.SCHEDULE_TO_CLOSE, NOT_ENOUGH_TIME_MESSAGE),
        (TimeoutType.HEARTBEAT, RetryState.TIMEOUT, TimeoutType.SCHEDULE_TO_CLOSE, NOT_ENOUGH_TIME_MESSAGE),
        (TimeoutType.SCHEDULE_TO_CLOSE, RetryState.TIMEOUT, TimeoutType.SCHEDULE_TO_CLOSE, NOT_ENOUGH_TIME_MESSAGE),
        (TimeoutType.SCHEDULE_TO_START, RetryState.TIMEOUT, TimeoutType.SCHEDULE_TO_START, "activity ScheduleToStart timeout"),
        (TimeoutType.START_TO_CLOSE, RetryState.MAXIMUM_ATTEMPTS_REACHED, TimeoutType.START_TO_CLOSE, "activity StartToClose timeout"),
        (TimeoutType.START_TO_CLOSE, RetryState.NON_RETRYABLE_FAILURE, TimeoutType.START_TO_CLOSE, "activity StartToClose timeout"),
        (TimeoutType.HEARTBEAT, RetryState.MAXIMUM_ATTEMPTS_REACHED, TimeoutType.HEARTBEAT, "activity Heartbeat timeout"),
    ],
    ids=["stc-timeout", "hb-timeout", "s2c-timeout", "s2s-timeout", "stc-max-attempts", "stc-non-retryable", "hb-max-attempts"],
)
def test_timed_out_event_failure(fired, retry_state, expected_type, expected_message) -> None:
    previous = ApplicationFailure(message="boom", type="ToolCrash")
    failure = timed_out_event_failure(
        fired, retry_state, last_failure=previous, last_heartbeat_details=b"42"
    )
    assert failure.timeout_type is expected_type
    assert failure.message == expected_message
    assert failure.cause is previous
    assert failure.last_heartbeat_details == b"42"


NOT_ENOUGH = (
    "Not enough time to schedule next retry before activity ScheduleToClose timeout, "
    "giving up retrying"
)


def test_not_enough_time_message_is_the_servers_text() -> None:
    assert NOT_ENOUGH_TIME_MESSAGE == NOT_ENOUGH


# --- 2.4 heartbeats -----------------------------------------------------------------


def test_heartbeat_deadline_runs_from_later_of_start_and_last_heartbeat() -> None:
    assert heartbeat_deadline(started_time=T, last_heartbeat_time=None, heartbeat_timeout=3 * S) == T + 3 * S
    assert heartbeat_deadline(started_time=T, last_heartbeat_time=T + 4 * S, heartbeat_timeout=3 * S) == T + 7 * S
    # A heartbeat stamped before the start (e.g. from an earlier attempt) is ignored.
    assert heartbeat_deadline(started_time=T, last_heartbeat_time=T - 9 * S, heartbeat_timeout=3 * S) == T + 3 * S
    assert heartbeat_deadline(started_time=T, last_heartbeat_time=T, heartbeat_timeout=NONE) is None


def test_heartbeat_never_moves_start_to_close_or_schedule_to_close() -> None:
    limits = timeouts(60 * S, 60 * S, 10 * S, 3 * S)
    before = activity_deadlines(limits, first_scheduled_time=T, scheduled_time=T, started_time=T)
    after = activity_deadlines(
        limits, first_scheduled_time=T, scheduled_time=T, started_time=T, last_heartbeat_time=T + 9 * S
    )
    assert before == (
        ActivityDeadline(T + 3 * S, TimeoutType.HEARTBEAT),
        ActivityDeadline(T + 10 * S, TimeoutType.START_TO_CLOSE),
        ActivityDeadline(T + 60 * S, TimeoutType.SCHEDULE_TO_CLOSE),
    )
    assert after == (
        ActivityDeadline(T + 10 * S, TimeoutType.START_TO_CLOSE),
        ActivityDeadline(T + 12 * S, TimeoutType.HEARTBEAT),
        ActivityDeadline(T + 60 * S, TimeoutType.SCHEDULE_TO_CLOSE),
    )


# --- deadlines ----------------------------------------------------------------------


def test_schedule_to_start_only_before_start_and_per_attempt() -> None:
    limits = timeouts(60 * S, 5 * S, 10 * S)
    retry_due = T + 20 * S
    assert activity_deadlines(limits, first_scheduled_time=T, scheduled_time=retry_due) == (
        ActivityDeadline(T + 25 * S, TimeoutType.SCHEDULE_TO_START),
        ActivityDeadline(T + 60 * S, TimeoutType.SCHEDULE_TO_CLOSE),
    )


def test_ties_break_by_timeout_type_number() -> None:
    limits = timeouts(5 * S, 5 * S, 5 * S, 5 * S)
    assert [d.timeout_type for d in activity_deadlines(limits, first_scheduled_time=T, scheduled_time=T)] == [
        TimeoutType.SCHEDULE_TO_START,
        TimeoutType.SCHEDULE_TO_CLOSE,
    ]
    assert [
        d.timeout_type
        for d in activity_deadlines(limits, first_scheduled_time=T - 1 * S, scheduled_time=T, started_time=T)
    ] == [TimeoutType.SCHEDULE_TO_CLOSE, TimeoutType.START_TO_CLOSE, TimeoutType.HEARTBEAT]


def test_deadlines_after_run_expiration_are_not_created() -> None:
    limits = timeouts(60 * S, 60 * S, 10 * S)
    assert activity_deadlines(
        limits, first_scheduled_time=T, scheduled_time=T, started_time=T, run_expiration=T + 30 * S
    ) == (ActivityDeadline(T + 10 * S, TimeoutType.START_TO_CLOSE),)


def test_retry_expiration() -> None:
    assert retry_expiration(T, 60 * S) == T + 60 * S
    assert retry_expiration(T, NONE) is None
