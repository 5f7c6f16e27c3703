"""Every retry vector of SEMANTICS.md 1.8, one test (or parameter) each."""

from __future__ import annotations

from datetime import timedelta

import pytest

from streamproc.semantics import (
    ActivityFailure,
    ApplicationFailure,
    InvalidArgument,
    RetryPolicy,
    RetryState,
    TimeoutFailure,
    TimeoutType,
    activity_retry_decision,
    normalize_activity_retry_policy,
    normalize_workflow_retry_policy,
    plan_workflow_retry,
    workflow_execution_expiration,
    workflow_retry_decision,
)
from tests.support.vector_times import S, T


def activity_delay(policy: RetryPolicy | None, attempt: int, failure=None, **kwargs):
    decision = activity_retry_decision(
        normalize_activity_retry_policy(policy),
        attempt=attempt,
        failure=failure,
        now=kwargs.pop("now", T),
        expiration=kwargs.pop("expiration", None),
        **kwargs,
    )
    return decision.delay, decision.retry_state


# --- default policy table -----------------------------------------------------------

DEFAULT_TABLE = [(1, 1), (2, 2), (3, 4), (4, 8), (5, 16), (6, 32), (7, 64), (8, 100), (9, 100), (10, 100)]


@pytest.mark.parametrize(
    ("attempt", "seconds"), DEFAULT_TABLE, ids=[f"default-n{n}" for n, _ in DEFAULT_TABLE]
)
def test_default_policy_table(attempt: int, seconds: int) -> None:
    assert activity_delay(None, attempt) == (seconds * S, RetryState.IN_PROGRESS)


# --- R01 .. R25 ---------------------------------------------------------------------

R01_DELAYS = ["3", "4.5", "6.75", "10.125", "15.1875", "22.78125", "34.171875"]


@pytest.mark.parametrize(
    ("attempt", "expected"),
    list(enumerate(R01_DELAYS, start=1)),
    ids=[f"R01-n{n}" for n in range(1, 8)],
)
def test_R01_coefficient_one_and_a_half(attempt: int, expected: str) -> None:
    policy = normalize_activity_retry_policy(
        RetryPolicy(initial_interval=3 * S, backoff_coefficient=1.5)
    )
    assert policy.maximum_interval == 300 * S
    delay, state = activity_delay(policy, attempt)
    assert state is RetryState.IN_PROGRESS
    # Exact: these powers of 1.5 are representable, so no truncation is involved.
    assert delay == timedelta(microseconds=round(float(expected) * 1_000_000))


@pytest.mark.parametrize("attempt", [1, 2, 3, 4], ids=[f"R03-n{n}" for n in range(1, 5)])
def test_R03_constant_backoff(attempt: int) -> None:
    policy = RetryPolicy(initial_interval=5 * S, backoff_coefficient=1.0)
    assert activity_delay(policy, attempt) == (5 * S, RetryState.IN_PROGRESS)


@pytest.mark.parametrize(
    ("attempt", "expected"),
    [
        (1, (1 * S, RetryState.IN_PROGRESS)),
        (2, (2 * S, RetryState.IN_PROGRESS)),
        (3, (None, RetryState.MAXIMUM_ATTEMPTS_REACHED)),
    ],
    ids=["R04-n1", "R04-n2", "R04-n3"],
)
def test_R04_maximum_attempts_three(attempt: int, expected) -> None:
    assert activity_delay(RetryPolicy(maximum_attempts=3), attempt) == expected


def test_R05_maximum_attempts_one_means_no_retry() -> None:
    assert activity_delay(RetryPolicy(maximum_attempts=1), 1) == (
        None,
        RetryState.MAXIMUM_ATTEMPTS_REACHED,
    )


@pytest.mark.parametrize(
    "normalize",
    [normalize_activity_retry_policy, normalize_workflow_retry_policy],
    ids=["R06-activity", "R06-workflow"],
)
def test_R06_negative_maximum_attempts_rejected(normalize) -> None:
    with pytest.raises(InvalidArgument) as info:
        normalize(RetryPolicy(maximum_attempts=-1))
    assert str(info.value) == "MaximumAttempts cannot be negative on retry policy."


def test_R07_coefficient_below_one_rejected() -> None:
    with pytest.raises(InvalidArgument) as info:
        normalize_activity_retry_policy(RetryPolicy(backoff_coefficient=0.5, maximum_attempts=0))
    assert str(info.value) == "BackoffCoefficient cannot be less than 1 on retry policy."


def test_R08_coefficient_below_one_accepted_with_single_attempt() -> None:
    policy = normalize_activity_retry_policy(
        RetryPolicy(backoff_coefficient=0.5, maximum_attempts=1)
    )
    assert policy.backoff_coefficient == 0.5
    assert policy.maximum_attempts == 1


def test_R09_maximum_below_initial_rejected() -> None:
    with pytest.raises(InvalidArgument) as info:
        normalize_activity_retry_policy(
            RetryPolicy(initial_interval=10 * S, maximum_interval=5 * S)
        )
    assert str(info.value) == "MaximumInterval cannot be less than InitialInterval on retry policy."


def test_R10_maximum_defaults_to_hundred_times_initial() -> None:
    policy = normalize_activity_retry_policy(RetryPolicy(initial_interval=1500 * timedelta(milliseconds=1)))
    assert policy.maximum_interval == 150 * S


def test_R11_gives_up_at_once_when_retry_would_pass_expiration() -> None:
    assert activity_delay(
        None, 1, now=T + timedelta(seconds=59.5), expiration=T + 60 * S
    ) == (None, RetryState.TIMEOUT)


def test_R12_retry_landing_exactly_on_expiration_is_allowed() -> None:
    assert activity_delay(None, 1, now=T + 59 * S, expiration=T + 60 * S) == (
        1 * S,
        RetryState.IN_PROGRESS,
    )


def test_R15_activity_next_retry_delay_exceeds_maximum_interval() -> None:
    failure = ApplicationFailure(type="RateLimited", next_retry_delay=timedelta(minutes=7))
    policy = RetryPolicy(maximum_interval=100 * S)
    assert activity_delay(policy, 1, failure) == (timedelta(minutes=7), RetryState.IN_PROGRESS)


def test_R16_workflow_next_retry_delay_is_capped() -> None:
    failure = ApplicationFailure(type="RateLimited", next_retry_delay=timedelta(minutes=7))
    policy = normalize_workflow_retry_policy(RetryPolicy(maximum_interval=100 * S))
    decision = workflow_retry_decision(
        policy, attempt=1, failure=failure, now=T, execution_expiration=None
    )
    assert (decision.delay, decision.retry_state) == (100 * S, RetryState.IN_PROGRESS)


def test_R18_listed_application_type_is_non_retryable() -> None:
    policy = RetryPolicy(non_retryable_error_types=("ValidationError",))
    failure = ApplicationFailure(type="ValidationError")
    assert activity_delay(policy, 1, failure) == (None, RetryState.NON_RETRYABLE_FAILURE)


def test_R20_non_retryable_flag_wins_with_empty_list() -> None:
    failure = ApplicationFailure(type="Anything", non_retryable=True)
    assert activity_delay(RetryPolicy(), 1, failure) == (None, RetryState.NON_RETRYABLE_FAILURE)


@pytest.mark.parametrize(
    ("types", "expected"),
    [
        ((), (1 * S, RetryState.IN_PROGRESS)),
        (("TemporalTimeout:StartToClose",), (None, RetryState.NON_RETRYABLE_FAILURE)),
    ],
    ids=["R21-empty-list", "R21-listed"],
)
def test_R21_start_to_close_timeout_retryability(types, expected) -> None:
    failure = TimeoutFailure(
        message="activity StartToClose timeout", timeout_type=TimeoutType.START_TO_CLOSE
    )
    assert activity_delay(RetryPolicy(non_retryable_error_types=types), 1, failure) == expected


def test_R22_unknown_timeout_type_in_list_rejected() -> None:
    with pytest.raises(InvalidArgument) as info:
        normalize_activity_retry_policy(
            RetryPolicy(non_retryable_error_types=("TemporalTimeout:Bogus",))
        )
    assert str(info.value) == "Invalid timeout type value: Bogus."


def test_R23_workflow_without_policy_does_not_retry() -> None:
    plan = plan_workflow_retry(
        normalize_workflow_retry_policy(None),
        attempt=1,
        failure=ApplicationFailure(type="Boom"),
        now=T,
        execution_expiration=None,
        previous_run_execution_time=T - 30 * S,
    )
    assert plan.retry_state is RetryState.RETRY_POLICY_NOT_SET
    assert plan.next_attempt is None and plan.first_workflow_task_backoff is None


def test_R24_workflow_retry_chain() -> None:
    policy = normalize_workflow_retry_policy(
        RetryPolicy(initial_interval=10 * S, maximum_attempts=3)
    )
    failure = ApplicationFailure(type="Boom")
    observed = []
    for attempt in (1, 2, 3):
        plan = plan_workflow_retry(
            policy,
            attempt=attempt,
            failure=failure,
            now=T,
            execution_expiration=None,
            previous_run_execution_time=T - 5 * S,  # each run lived 5 s
        )
        observed.append((plan.retry_state, plan.next_attempt, plan.first_workflow_task_backoff))
    assert observed == [
        (RetryState.IN_PROGRESS, 2, 10 * S),
        (RetryState.IN_PROGRESS, 3, 20 * S),
        (RetryState.MAXIMUM_ATTEMPTS_REACHED, None, None),
    ]


def test_R25_workflow_retry_past_execution_expiration_times_out() -> None:
    expiration = workflow_execution_expiration(T, 60 * S)
    assert expiration == T + 60 * S
    policy = normalize_workflow_retry_policy(RetryPolicy(initial_interval=10 * S))
    decision = workflow_retry_decision(
        policy,
        attempt=1,
        failure=ApplicationFailure(type="Boom"),
        now=T + 55 * S,
        execution_expiration=expiration,
    )
    assert (decision.delay, decision.retry_state) == (None, RetryState.TIMEOUT)


# --- consequences the reference calls out next to the vectors -----------------------


def test_workflow_list_does_not_match_type_inside_activity_failure_wrapper() -> None:
    policy = normalize_workflow_retry_policy(
        RetryPolicy(non_retryable_error_types=("ValidationError",))
    )
    wrapped = ActivityFailure(
        message="Activity task failed", cause=ApplicationFailure(type="ValidationError")
    )
    decision = workflow_retry_decision(
        policy, attempt=1, failure=wrapped, now=T, execution_expiration=None
    )
    assert (decision.delay, decision.retry_state) == (1 * S, RetryState.IN_PROGRESS)


def test_activity_explicit_zero_next_retry_delay_stops_with_timeout() -> None:
    failure = ApplicationFailure(type="Boom", next_retry_delay=timedelta(0))
    assert activity_delay(RetryPolicy(), 1, failure) == (None, RetryState.TIMEOUT)


def test_workflow_zero_next_retry_delay_becomes_maximum_interval() -> None:
    policy = normalize_workflow_retry_policy(RetryPolicy(maximum_interval=30 * S))
    failure = ApplicationFailure(type="Boom", next_retry_delay=timedelta(0))
    decision = workflow_retry_decision(
        policy, attempt=1, failure=failure, now=T, execution_expiration=None
    )
    assert (decision.delay, decision.retry_state) == (30 * S, RetryState.IN_PROGRESS)


def test_next_retry_delay_still_bounded_by_attempts_and_expiration() -> None:
    failure = ApplicationFailure(type="Boom", next_retry_delay=timedelta(minutes=7))
    assert activity_delay(RetryPolicy(maximum_attempts=2), 2, failure) == (
        None,
        RetryState.MAXIMUM_ATTEMPTS_REACHED,
    )
    assert activity_delay(
        RetryPolicy(), 1, failure, now=T, expiration=T + timedelta(minutes=6)
    ) == (None, RetryState.TIMEOUT)


def test_non_retryable_classification_precedes_next_retry_delay() -> None:
    failure = ApplicationFailure(
        type="Boom", non_retryable=True, next_retry_delay=timedelta(minutes=7)
    )
    assert activity_delay(RetryPolicy(), 1, failure) == (None, RetryState.NON_RETRYABLE_FAILURE)
