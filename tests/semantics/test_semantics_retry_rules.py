"""Defaults, validation messages, failure classification and backoff arithmetic
(SEMANTICS.md 1.1 to 1.7) beyond the numbered vectors."""

from __future__ import annotations

from datetime import timedelta

import pytest

from streamproc.semantics import (
    MAX_DURATION,
    ActivityFailure,
    ApplicationFailure,
    CanceledFailure,
    ChildWorkflowFailure,
    Failure,
    InvalidArgument,
    RetryPolicy,
    RetrySettings,
    RetryState,
    ServerFailure,
    TerminatedFailure,
    TimeoutFailure,
    TimeoutType,
    activity_retry_decision,
    ensure_retry_defaults,
    exponential_backoff_ns,
    first_workflow_task_backoff,
    is_retryable_failure,
    next_backoff_interval,
    normalize_activity_retry_policy,
    normalize_workflow_retry_policy,
    validate_retry_policy,
    workflow_execution_expiration,
)
from streamproc.semantics.durations import INT64_MAX
from tests.support.vector_times import S, T

# --- 1.1 defaults -------------------------------------------------------------------


def test_activity_without_policy_gets_full_default_policy() -> None:
    assert normalize_activity_retry_policy(None) == RetryPolicy(
        initial_interval=1 * S,
        backoff_coefficient=2.0,
        maximum_interval=100 * S,
        maximum_attempts=0,
    )


def test_workflow_without_policy_gets_none() -> None:
    assert normalize_workflow_retry_policy(None) is None


def test_workflow_policy_is_defaulted_field_by_field() -> None:
    policy = normalize_workflow_retry_policy(RetryPolicy(backoff_coefficient=3.0))
    assert policy == RetryPolicy(
        initial_interval=1 * S, backoff_coefficient=3.0, maximum_interval=100 * S
    )


def test_maximum_interval_multiplier_is_truncated_to_an_integer() -> None:
    settings = RetrySettings(maximum_interval_coefficient=2.9)
    policy = ensure_retry_defaults(RetryPolicy(initial_interval=10 * S), settings)
    assert policy.maximum_interval == 20 * S


def test_defaulted_maximum_wraps_like_go_int64() -> None:
    # 100 x 1100 days does not fit in int64 nanoseconds; Go wraps to a negative value,
    # which validation then rejects as a negative maximum interval.
    with pytest.raises(InvalidArgument) as info:
        normalize_activity_retry_policy(RetryPolicy(initial_interval=timedelta(days=1100)))
    assert str(info.value) == "invalid MaximumInterval set on retry policy: negative duration"


# --- 1.2 validation order and messages ----------------------------------------------


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        (
            RetryPolicy(initial_interval=-22 * S),
            "invalid InitialInterval set on retry policy: negative duration",
        ),
        (
            RetryPolicy(backoff_coefficient=0.8),
            "BackoffCoefficient cannot be less than 1 on retry policy.",
        ),
        (
            RetryPolicy(backoff_coefficient=-2.0),
            "BackoffCoefficient cannot be less than 1 on retry policy.",
        ),
        (
            RetryPolicy(maximum_interval=-2 * S),
            "invalid MaximumInterval set on retry policy: negative duration",
        ),
        (
            RetryPolicy(initial_interval=10 * S, maximum_interval=5 * S),
            "MaximumInterval cannot be less than InitialInterval on retry policy.",
        ),
        (
            RetryPolicy(maximum_attempts=-3),
            "MaximumAttempts cannot be negative on retry policy.",
        ),
        (
            RetryPolicy(non_retryable_error_types=("TemporalTimeout:Unspecified",)),
            "Invalid timeout type value: Unspecified.",
        ),
        (
            RetryPolicy(non_retryable_error_types=("TemporalTimeout:unknown",)),
            "Invalid timeout type value: unknown.",
        ),
        (
            RetryPolicy(non_retryable_error_types=("TemporalTimeout:",)),
            "Invalid timeout type value: .",
        ),
        (
            # First failing check wins: negative initial interval before the coefficient.
            RetryPolicy(initial_interval=-1 * S, backoff_coefficient=0.5, maximum_attempts=-1),
            "invalid InitialInterval set on retry policy: negative duration",
        ),
        (
            RetryPolicy(backoff_coefficient=0.5, maximum_attempts=-1),
            "BackoffCoefficient cannot be less than 1 on retry policy.",
        ),
        (
            RetryPolicy(
                initial_interval=10 * S,
                maximum_interval=5 * S,
                maximum_attempts=-1,
                non_retryable_error_types=("TemporalTimeout:Bogus",),
            ),
            "MaximumInterval cannot be less than InitialInterval on retry policy.",
        ),
        (
            RetryPolicy(maximum_attempts=-1, non_retryable_error_types=("TemporalTimeout:Bogus",)),
            "MaximumAttempts cannot be negative on retry policy.",
        ),
    ],
    ids=[
        "negative-initial",
        "coefficient-0.8",
        "coefficient-negative",
        "negative-maximum",
        "maximum-below-initial",
        "negative-attempts",
        "timeout-unspecified",
        "timeout-unknown",
        "timeout-empty-suffix",
        "order-initial-first",
        "order-coefficient-before-attempts",
        "order-interval-before-attempts",
        "order-attempts-before-types",
    ],
)
def test_validation_messages(policy: RetryPolicy, message: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        normalize_activity_retry_policy(policy)
    assert str(info.value) == message
    assert isinstance(info.value, ValueError)


def test_single_attempt_skips_every_other_check() -> None:
    policy = RetryPolicy(
        initial_interval=-5 * S,
        backoff_coefficient=0.1,
        maximum_interval=-1 * S,
        maximum_attempts=1,
        non_retryable_error_types=("TemporalTimeout:Bogus",),
    )
    assert validate_retry_policy(policy) == policy


@pytest.mark.parametrize(
    "entry",
    [
        "TemporalTimeout:StartToClose",
        "TemporalTimeout:ScheduleToStart",
        "TemporalTimeout:ScheduleToClose",
        "TemporalTimeout:Heartbeat",
        "TemporalTimeout:TIMEOUT_TYPE_HEARTBEAT",
        "temporaltimeout:Bogus",  # the prefix is case-sensitive: just an error type
    ],
)
def test_valid_non_retryable_entries(entry: str) -> None:
    normalize_activity_retry_policy(RetryPolicy(non_retryable_error_types=(entry,)))


def test_durations_capped_at_hundred_years() -> None:
    policy = normalize_activity_retry_policy(
        RetryPolicy(initial_interval=timedelta(days=200 * 365), maximum_interval=timedelta(days=300 * 365))
    )
    assert policy.initial_interval == MAX_DURATION == timedelta(seconds=3_153_600_000)
    assert policy.maximum_interval == MAX_DURATION


def test_non_retryable_types_must_not_be_a_bare_string() -> None:
    with pytest.raises(TypeError):
        RetryPolicy(non_retryable_error_types="ValidationError")  # type: ignore[arg-type]


# --- 1.3 classification -------------------------------------------------------------


def _timeout(kind: TimeoutType) -> TimeoutFailure:
    return TimeoutFailure(message=f"activity {kind.short_name} timeout", timeout_type=kind)


@pytest.mark.parametrize(
    ("failure", "types", "retryable"),
    [
        (None, (), True),
        (TerminatedFailure(), (), False),
        (CanceledFailure(), (), False),
        (_timeout(TimeoutType.START_TO_CLOSE), (), True),
        (_timeout(TimeoutType.HEARTBEAT), (), True),
        (_timeout(TimeoutType.HEARTBEAT), ("TemporalTimeout:Heartbeat",), False),
        (_timeout(TimeoutType.HEARTBEAT), ("TemporalTimeout:StartToClose",), True),
        # Validation accepts the protobuf spelling, but matching uses the short name.
        (_timeout(TimeoutType.START_TO_CLOSE), ("TemporalTimeout:TIMEOUT_TYPE_START_TO_CLOSE",), True),
        (_timeout(TimeoutType.SCHEDULE_TO_START), (), False),
        (_timeout(TimeoutType.SCHEDULE_TO_CLOSE), (), False),
        (ServerFailure(), (), True),
        (ServerFailure(non_retryable=True), (), False),
        (ApplicationFailure(type="ValidationError"), ("ValidationError",), False),
        (ApplicationFailure(type="ValidationError"), ("validationerror",), True),
        (ApplicationFailure(type="ValidationError"), ("Validation",), True),
        (ApplicationFailure(type="X", non_retryable=True), (), False),
        (ActivityFailure(cause=ApplicationFailure(type="X", non_retryable=True)), ("X",), True),
        (ChildWorkflowFailure(cause=TerminatedFailure()), (), True),
        (Failure(message="anything else"), (), True),
    ],
    ids=[
        "nil",
        "terminated",
        "canceled",
        "start-to-close",
        "heartbeat",
        "heartbeat-listed",
        "heartbeat-other-listed",
        "proto-spelling-does-not-match",
        "schedule-to-start",
        "schedule-to-close",
        "server",
        "server-non-retryable",
        "application-listed",
        "application-case-sensitive",
        "application-whole-string",
        "application-flag",
        "activity-wrapper-top-level-only",
        "child-wrapper-top-level-only",
        "other",
    ],
)
def test_is_retryable_failure(failure, types, retryable: bool) -> None:
    assert is_retryable_failure(failure, types) is retryable


# --- 1.4 backoff arithmetic ---------------------------------------------------------


def test_interval_truncates_toward_zero_in_nanoseconds() -> None:
    # 1 us x 1.0017 = 1001.7 ns: Go truncates to 1001, rounding would give 1002.
    assert exponential_backoff_ns(timedelta(microseconds=1), 1.0017, 2) == 1001
    assert exponential_backoff_ns(timedelta(microseconds=3), 1.5, 2) == 4500


# Computed with Go 1.26.8 (linux/amd64): int64(float64(ns) * math.Pow(c, attempt-1)).
# Python's ``**`` differs from Go's math.Pow in the last bit for these, which moves the
# truncated result by a nanosecond or more.
GO_BACKOFF_VECTORS = [
    (86_400_000_000_000, 1.0411, 16, 158_088_558_570_480),
    (86_400_000_000_000, 1.1507, 11, 351_669_637_221_862),
    (1_000_000_000, 1.274, 67, 8_733_377_802_138_088),
    (3_000_000_000, 1.3973, 60, 1_119_982_247_654_992_256),
    (1_500_000_000, 3.2331, 20, 7_225_283_179_668_259_840),
]


@pytest.mark.parametrize(("initial_ns", "coefficient", "attempt", "expected_ns"), GO_BACKOFF_VECTORS)
def test_interval_matches_go_math_pow_bit_for_bit(initial_ns, coefficient, attempt, expected_ns) -> None:
    initial = timedelta(microseconds=initial_ns // 1000)
    assert exponential_backoff_ns(initial, coefficient, attempt) == expected_ns


def backoff(attempt: int, initial: timedelta, maximum: timedelta):
    """The decision for `attempt` of a policy doubling from `initial` up to `maximum`, with no
    attempt limit."""
    return next_backoff_interval(now=T, attempt=attempt, maximum_attempts=0, initial_interval=initial,
                                 maximum_interval=maximum, backoff_coefficient=2.0)


def test_interval_overflow_clamps_to_int64_max_then_maximum_interval() -> None:
    assert exponential_backoff_ns(100 * S, 2.0, 100) == INT64_MAX
    decision = backoff(attempt=100, initial=100 * S, maximum=200 * S)
    assert (decision.retry_state, decision.delay) == (RetryState.IN_PROGRESS, 200 * S)


def test_attempt_below_one_counts_as_one() -> None:
    decision = backoff(attempt=0, initial=3 * S, maximum=100 * S)
    assert decision.delay == 3 * S


def test_zero_maximum_with_zero_interval_is_timeout() -> None:
    decision = backoff(attempt=1, initial=timedelta(0), maximum=timedelta(0))
    assert (decision.retry_state, decision.delay) == (RetryState.TIMEOUT, None)


def test_zero_maximum_means_uncapped() -> None:
    decision = backoff(attempt=30, initial=1 * S, maximum=timedelta(0))
    assert decision.delay == 2**29 * S


def test_no_jitter_same_inputs_same_delay() -> None:
    results = {
        activity_retry_decision(
            normalize_activity_retry_policy(None), attempt=4, failure=None, now=T, expiration=None
        ).delay
        for _ in range(50)
    }
    assert results == {8 * S}


# --- 1.6 activity decision order ----------------------------------------------------


def test_activity_no_policy_comes_first() -> None:
    decision = activity_retry_decision(
        None, attempt=1, failure=None, now=T, expiration=None, cancel_requested=True
    )
    assert decision.retry_state is RetryState.RETRY_POLICY_NOT_SET


def test_activity_cancel_requested_before_timeout_and_classification() -> None:
    policy = normalize_activity_retry_policy(None)
    for failure in (_timeout(TimeoutType.SCHEDULE_TO_START), TerminatedFailure(), None):
        decision = activity_retry_decision(
            policy, attempt=1, failure=failure, now=T, expiration=None, cancel_requested=True
        )
        assert decision.retry_state is RetryState.CANCEL_REQUESTED


def test_activity_schedule_timeouts_are_timeout_not_non_retryable() -> None:
    policy = normalize_activity_retry_policy(None)
    for kind in (TimeoutType.SCHEDULE_TO_START, TimeoutType.SCHEDULE_TO_CLOSE):
        decision = activity_retry_decision(
            policy, attempt=1, failure=_timeout(kind), now=T, expiration=None
        )
        assert decision.retry_state is RetryState.TIMEOUT


def test_maximum_attempts_checked_before_expiration() -> None:
    policy = normalize_activity_retry_policy(RetryPolicy(maximum_attempts=2))
    decision = activity_retry_decision(
        policy, attempt=2, failure=None, now=T, expiration=T + timedelta(milliseconds=1)
    )
    assert decision.retry_state is RetryState.MAXIMUM_ATTEMPTS_REACHED


# --- 1.4 / 1.7 workflow helpers -----------------------------------------------------


def test_execution_expiration_rounds_to_millisecond() -> None:
    start = T + timedelta(microseconds=1_499)
    assert workflow_execution_expiration(start, 60 * S) == T + 60 * S + timedelta(milliseconds=1)
    start = T + timedelta(microseconds=1_500)
    assert workflow_execution_expiration(start, 60 * S) == T + 60 * S + timedelta(milliseconds=2)
    assert workflow_execution_expiration(T, timedelta(0)) is None


def test_first_workflow_task_backoff_enforces_one_second_spacing() -> None:
    lived = timedelta(milliseconds=300)
    assert first_workflow_task_backoff(
        timedelta(milliseconds=200), now=T + lived, previous_run_execution_time=T
    ) == timedelta(milliseconds=700)
    assert first_workflow_task_backoff(
        timedelta(milliseconds=700), now=T + lived, previous_run_execution_time=T
    ) == timedelta(milliseconds=700)
    assert first_workflow_task_backoff(10 * S, now=T + lived, previous_run_execution_time=T) == 10 * S
