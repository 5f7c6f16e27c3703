"""General rules of retries and activity timeouts, checked with hypothesis."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from fractions import Fraction

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from streamproc.semantics import (
    ActivityTimeouts,
    ApplicationFailure,
    AttemptPlan,
    RetryPolicy,
    RetryState,
    TimeoutFailure,
    TimeoutType,
    activity_deadlines,
    activity_retry_decision,
    exponential_backoff_ns,
    normalize_activity_retry_policy,
    normalize_activity_timeouts,
    run_activity_timeline,
    schedule_activity,
    validate_retry_policy,
    workflow_retry_decision,
)
from streamproc.semantics.backoff import _go_pow_int
from tests.support.vector_times import T

millis = st.integers(min_value=1, max_value=10**9).map(lambda ms: timedelta(milliseconds=ms))
optional_millis = st.one_of(st.just(timedelta(0)), millis)
coefficients = st.floats(min_value=1.0, max_value=10.0, allow_nan=False)
attempts = st.integers(min_value=1, max_value=500)


@st.composite
def valid_policies(draw) -> RetryPolicy:
    initial = draw(millis)
    maximum = draw(st.one_of(st.just(timedelta(0)), millis.filter(lambda m: m >= initial)))
    return normalize_activity_retry_policy(
        RetryPolicy(
            initial_interval=initial,
            backoff_coefficient=draw(coefficients),
            maximum_interval=maximum,
            maximum_attempts=draw(st.integers(min_value=0, max_value=50)),
        )
    )


failures = st.one_of(
    st.none(),
    st.builds(ApplicationFailure, type=st.sampled_from(["A", "B"])),
    st.sampled_from(
        [
            TimeoutFailure(timeout_type=TimeoutType.START_TO_CLOSE),
            TimeoutFailure(timeout_type=TimeoutType.HEARTBEAT),
        ]
    ),
)


@given(valid_policies(), attempts, failures)
def test_activity_delay_never_exceeds_maximum_interval(policy, attempt, failure) -> None:
    decision = activity_retry_decision(policy, attempt=attempt, failure=failure, now=T, expiration=None)
    if decision.delay is not None:
        assert timedelta(0) < decision.delay <= policy.maximum_interval


@given(valid_policies(), st.integers(min_value=1, max_value=200))
def test_delays_non_decreasing_until_the_cap(policy, attempt) -> None:
    unlimited = replace(policy, maximum_attempts=0)
    here = activity_retry_decision(unlimited, attempt=attempt, failure=None, now=T, expiration=None)
    after = activity_retry_decision(unlimited, attempt=attempt + 1, failure=None, now=T, expiration=None)
    assert here.delay <= after.delay
    if here.delay == policy.maximum_interval:
        assert after.delay == policy.maximum_interval


@given(attempts, failures, st.booleans())
def test_maximum_attempts_one_never_retries(attempt, failure, workflow) -> None:
    policy = normalize_activity_retry_policy(RetryPolicy(maximum_attempts=1))
    if workflow:
        decision = workflow_retry_decision(
            policy, attempt=attempt, failure=failure, now=T, execution_expiration=None
        )
    else:
        decision = activity_retry_decision(
            policy, attempt=attempt, failure=failure, now=T, expiration=None
        )
    assert not decision.should_retry and decision.delay is None


@given(st.floats(allow_nan=True, allow_infinity=True), optional_millis, optional_millis, st.lists(st.text(max_size=30), max_size=3))
def test_single_attempt_policy_always_valid(coefficient, initial, maximum, types) -> None:
    policy = RetryPolicy(
        initial_interval=-initial,
        backoff_coefficient=coefficient,
        maximum_interval=maximum,
        maximum_attempts=1,
        non_retryable_error_types=tuple(types),
    )
    assert validate_retry_policy(policy) is policy


@given(st.integers(min_value=1, max_value=10**6))
def test_unlimited_attempts_keep_retrying(attempt) -> None:
    decision = activity_retry_decision(
        normalize_activity_retry_policy(None), attempt=attempt, failure=None, now=T, expiration=None
    )
    expected = timedelta(seconds=min(2 ** min(attempt - 1, 10), 100))
    assert (decision.retry_state, decision.delay) == (RetryState.IN_PROGRESS, expected)


@given(valid_policies(), attempts, st.integers(min_value=0, max_value=10**7))
def test_retry_never_due_after_expiration(policy, attempt, remaining_ms) -> None:
    expiration = T + timedelta(milliseconds=remaining_ms)
    decision = activity_retry_decision(policy, attempt=attempt, failure=None, now=T, expiration=expiration)
    if decision.should_retry:
        assert T + decision.delay <= expiration
    else:
        assert decision.delay is None


@given(st.integers(min_value=1, max_value=10), st.integers(min_value=0, max_value=15))
def test_go_pow_exact_for_representable_integer_powers(base, exponent) -> None:
    assert _go_pow_int(float(base), exponent) == float(base**exponent)


@given(st.floats(min_value=1.0, max_value=4.0), st.integers(min_value=0, max_value=300))
def test_go_pow_close_to_exact_power(base, exponent) -> None:
    exact = Fraction(base) ** exponent
    assume(exact < 2**1000)
    assert abs(Fraction(_go_pow_int(base, exponent)) - exact) <= exact * Fraction(1, 10**12)


@given(millis, coefficients, attempts)
def test_backoff_ns_is_truncated_product(initial, coefficient, attempt) -> None:
    ns = exponential_backoff_ns(initial, coefficient, attempt)
    product = (initial // timedelta(microseconds=1)) * 1000 * _go_pow_int(coefficient, attempt - 1)
    assert ns == (2**63 - 1 if product >= 2.0**63 else int(product))


# --- activity timeouts --------------------------------------------------------------


timeout_values = st.one_of(
    st.just(timedelta(0)), st.integers(min_value=1, max_value=10**6).map(lambda s: timedelta(seconds=s))
)


@given(timeout_values, timeout_values, timeout_values, timeout_values, timeout_values)
def test_normalised_timeouts_invariants(s2c, s2s, stc, hb, run) -> None:
    assume(s2c or stc)
    out = normalize_activity_timeouts(
        ActivityTimeouts(schedule_to_close=s2c, schedule_to_start=s2s, start_to_close=stc, heartbeat=hb),
        run_timeout=run,
    )
    zero = timedelta(0)
    assert out.start_to_close > zero
    assert out.heartbeat <= out.start_to_close
    if out.schedule_to_close > zero:
        assert out.schedule_to_start <= out.schedule_to_close
        assert out.start_to_close <= out.schedule_to_close
    if run > zero:
        assert max(out.schedule_to_close, out.schedule_to_start, out.start_to_close, out.heartbeat) <= run
    again = normalize_activity_timeouts(out, run_timeout=run)
    assert again == out


@given(
    st.integers(min_value=1, max_value=100),
    st.integers(min_value=1, max_value=100),
    st.lists(st.integers(min_value=0, max_value=200), max_size=5),
)
def test_heartbeats_only_move_the_heartbeat_deadline(stc_s, hb_s, beats) -> None:
    limits = normalize_activity_timeouts(
        ActivityTimeouts(schedule_to_close=timedelta(seconds=300), start_to_close=timedelta(seconds=stc_s), heartbeat=timedelta(seconds=hb_s))
    )
    last = T + timedelta(seconds=max(beats)) if beats else None
    deadlines = {
        d.timeout_type: d.at
        for d in activity_deadlines(limits, first_scheduled_time=T, scheduled_time=T, started_time=T, last_heartbeat_time=last)
    }
    assert deadlines[TimeoutType.START_TO_CLOSE] == T + limits.start_to_close
    assert deadlines[TimeoutType.SCHEDULE_TO_CLOSE] == T + timedelta(seconds=300)
    assert deadlines[TimeoutType.HEARTBEAT] == max(T, last or T) + limits.heartbeat


@settings(max_examples=50, deadline=None)
@given(
    st.integers(min_value=1, max_value=120),
    st.integers(min_value=1, max_value=60),
    st.integers(min_value=0, max_value=5),
    st.integers(min_value=1, max_value=10),
)
def test_activity_never_outlives_schedule_to_close(s2c_s, stc_s, pickup_s, attempts_allowed) -> None:
    policy = normalize_activity_retry_policy(RetryPolicy(maximum_attempts=attempts_allowed))
    limits = normalize_activity_timeouts(
        ActivityTimeouts(schedule_to_close=timedelta(seconds=s2c_s), start_to_close=timedelta(seconds=stc_s))
    )
    timeline = run_activity_timeline(
        schedule_activity(policy, limits, T), [AttemptPlan(pickup_after=timedelta(seconds=pickup_s))]
    )
    deadline = T + timedelta(seconds=s2c_s)
    assert timeline.outcome is not None
    assert all(r.ended_time <= deadline for r in timeline.attempts)
    assert all(r.next_due is None or r.next_due <= deadline for r in timeline.attempts)
    assert len(timeline.attempts) <= attempts_allowed
