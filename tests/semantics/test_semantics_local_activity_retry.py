"""Where a failed local activity attempt is retried: in the worker up to the local retry
threshold, after a durable timer beyond it, never past schedule-to-close."""

from datetime import UTC, datetime, timedelta

from streamproc.semantics import RetryPolicy, RetryState, normalize_activity_retry_policy
from streamproc.semantics.failures import ApplicationFailure
from streamproc.semantics.local_activity_retry import DEFAULT_LOCAL_RETRY_THRESHOLD, plan_local_retry

NOW = datetime(2026, 1, 1, tzinfo=UTC)
POLICY = normalize_activity_retry_policy(RetryPolicy(initial_interval=timedelta(seconds=10), backoff_coefficient=2.0,
                                                     maximum_interval=timedelta(minutes=10)))
FAILED = ApplicationFailure(message="boom", type="Boom")


def plan(attempt, expiration=None, failure=FAILED, threshold=DEFAULT_LOCAL_RETRY_THRESHOLD):
    return plan_local_retry(POLICY, attempt=attempt, failure=failure, now=NOW, expiration=expiration,
                            local_retry_threshold=threshold)


def test_the_default_threshold_is_temporals_minute():
    assert DEFAULT_LOCAL_RETRY_THRESHOLD == timedelta(minutes=1)


def test_backoffs_up_to_the_threshold_are_waited_out_in_the_worker():
    assert [(p.delay, p.in_worker) for p in map(plan, (1, 2, 3, 4))] == [
        (timedelta(seconds=10), True), (timedelta(seconds=20), True), (timedelta(seconds=40), True),
        (timedelta(seconds=80), False)]


def test_the_threshold_itself_is_still_local():
    assert plan(1, threshold=timedelta(seconds=10)).in_worker
    assert not plan(1, threshold=timedelta(seconds=9)).in_worker


def test_no_retry_when_the_next_attempt_would_start_after_schedule_to_close():
    assert plan(1, expiration=NOW + timedelta(seconds=9)).retry_state is RetryState.TIMEOUT
    assert plan(1, expiration=NOW + timedelta(seconds=11)).retries


def test_non_retryable_failures_are_not_retried():
    final = plan(1, failure=ApplicationFailure(message="no", type="X", non_retryable=True))
    assert (final.retry_state, final.delay, final.retries) == (RetryState.NON_RETRYABLE_FAILURE, None, False)
