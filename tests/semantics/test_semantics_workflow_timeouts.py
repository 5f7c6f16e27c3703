"""Workflow timeouts: normalisation (every vector of SEMANTICS.md 3.1), deadlines (3.2),
what firing each timeout does (3.3) and workflow task retries (3.4)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamproc.semantics import (
    DEFAULT_WORKFLOW_TASK_TIMEOUT,
    MAX_WORKFLOW_TASK_TIMEOUT,
    RUN_TIMEOUT_MESSAGE,
    ContinueAsNewInitiator,
    InvalidArgument,
    NewRun,
    RetryPolicy,
    RetryState,
    TimeoutType,
    WorkflowExecutionStatus,
    WorkflowRunDeadlines,
    WorkflowTaskRetry,
    WorkflowTimedOut,
    WorkflowTimeouts,
    continue_as_new_timeouts,
    fail_workflow_task,
    fire_execution_timeout,
    fire_run_timeout,
    fire_workflow_task_timeout,
    normalize_child_workflow_timeouts,
    normalize_workflow_retry_policy,
    normalize_workflow_timeouts,
    run_timeout_failure,
    validate_workflow_start_delay,
    workflow_execution_expiration,
    workflow_run_deadlines,
    workflow_task_timeout_for_attempt,
)
from tests.support.vector_times import NONE, H, M, S, T


def timeouts(execution=NONE, run=NONE, task=NONE) -> WorkflowTimeouts:
    return WorkflowTimeouts(execution=execution, run=run, task=task)


# --- 3.1 normalisation --------------------------------------------------------------

NORMALISATION_VECTORS = [
    ("WT1", timeouts(), timeouts(task=10 * S)),
    ("WT2", timeouts(execution=H), timeouts(H, H, 10 * S)),
    ("WT3", timeouts(execution=H, run=2 * H), timeouts(H, H, 10 * S)),
    ("WT4", timeouts(run=30 * M, task=5 * M), timeouts(run=30 * M, task=120 * S)),
    ("WT5", timeouts(run=5 * S), timeouts(run=5 * S, task=5 * S)),
    ("WT6", timeouts(task=300 * S), timeouts(task=120 * S)),
]


@pytest.mark.parametrize(
    ("requested", "expected"),
    [v[1:] for v in NORMALISATION_VECTORS],
    ids=[v[0] for v in NORMALISATION_VECTORS],
)
def test_normalisation_vectors(requested, expected) -> None:
    assert normalize_workflow_timeouts(requested) == expected


def test_WT7_negative_run_timeout_is_rejected() -> None:
    with pytest.raises(InvalidArgument) as info:
        normalize_workflow_timeouts(timeouts(run=-1 * S))
    assert str(info.value) == (
        "An invalid WorkflowRunTimeoutSeconds is set on request. cause: negative duration"
    )


@pytest.mark.parametrize(
    ("requested", "message"),
    [
        (
            timeouts(execution=-1 * S, run=-1 * S),
            "An invalid WorkflowExecutionTimeoutSeconds is set on request."
            " cause: negative duration",
        ),
        (
            timeouts(task=-1 * S),
            "An invalid WorkflowTaskTimeoutSeconds is set on request. cause: negative duration",
        ),
    ],
    ids=["execution-checked-first", "task"],
)
def test_negative_execution_and_task_timeouts_are_rejected(requested, message) -> None:
    with pytest.raises(InvalidArgument) as info:
        normalize_workflow_timeouts(requested)
    assert str(info.value) == message


def test_timeouts_are_capped_at_100_years() -> None:
    huge = timedelta(days=200 * 365)
    result = normalize_workflow_timeouts(timeouts(execution=huge))
    assert result.execution == result.run == timedelta(days=100 * 365)


def test_namespace_default_task_timeout_is_used_before_the_caps() -> None:
    result = normalize_workflow_timeouts(
        timeouts(run=20 * S), default_task_timeout=timedelta(minutes=5)
    )
    assert result.task == 20 * S


def test_child_workflow_timeouts_follow_the_same_rules_with_command_messages() -> None:
    assert normalize_child_workflow_timeouts(timeouts(execution=H, run=2 * H)) == timeouts(
        H, H, 10 * S
    )
    for field, name in (("execution", "Execution"), ("run", "Run"), ("task", "Task")):
        with pytest.raises(InvalidArgument) as info:
            normalize_child_workflow_timeouts(WorkflowTimeouts(**{field: -1 * S}))
        assert str(info.value) == f"Invalid Workflow{name}Timeout."


# --- continue-as-new inheritance ----------------------------------------------------

CURRENT = timeouts(execution=H, run=30 * M, task=20 * S)

CONTINUE_AS_NEW_CASES = [
    ("unset-inherits-run-and-task", timeouts(), CURRENT),
    ("execution-is-always-inherited", timeouts(execution=5 * H), CURRENT),
    ("new-run-capped-at-inherited-execution", timeouts(run=2 * H), timeouts(H, H, 20 * S)),
    ("new-task-capped-at-120s", timeouts(task=10 * M), timeouts(H, 30 * M, 120 * S)),
    ("inherited-task-capped-at-new-run", timeouts(run=10 * S), timeouts(H, 10 * S, 10 * S)),
]


@pytest.mark.parametrize(
    ("requested", "expected"),
    [c[1:] for c in CONTINUE_AS_NEW_CASES],
    ids=[c[0] for c in CONTINUE_AS_NEW_CASES],
)
def test_continue_as_new_inheritance(requested, expected) -> None:
    assert continue_as_new_timeouts(requested, CURRENT) == expected


def test_continue_as_new_of_an_unlimited_chain() -> None:
    current = normalize_workflow_timeouts(timeouts())
    assert continue_as_new_timeouts(timeouts(run=5 * M), current) == timeouts(
        run=5 * M, task=10 * S
    )


@pytest.mark.parametrize(("field", "name"), [("run", "Run"), ("task", "Task")])
def test_continue_as_new_rejects_negative_timeouts(field, name) -> None:
    with pytest.raises(InvalidArgument) as info:
        continue_as_new_timeouts(WorkflowTimeouts(**{field: -1 * S}), CURRENT)
    assert str(info.value) == f"Invalid Workflow{name}Timeout."


# --- start delay --------------------------------------------------------------------


@pytest.mark.parametrize("delay", [NONE, 10 * S], ids=["zero", "ten-seconds"])
def test_cron_schedule_and_start_delay_may_not_be_combined(delay) -> None:
    with pytest.raises(InvalidArgument) as info:
        validate_workflow_start_delay("*/5 * * * *", delay)
    assert str(info.value) == "CronSchedule and WorkflowStartDelay may not be used together."


def test_start_delay_validation() -> None:
    assert validate_workflow_start_delay("*/5 * * * *", None) is None
    assert validate_workflow_start_delay("", 10 * S) == 10 * S
    with pytest.raises(InvalidArgument) as info:
        validate_workflow_start_delay("", -1 * S)
    assert str(info.value) == (
        "An invalid WorkflowStartDelaySeconds is set on request. cause: negative duration"
    )


# --- 3.2 deadlines ------------------------------------------------------------------


def test_deadline_vector_cron_run() -> None:
    start = datetime(2026, 5, 4, 0, 4, tzinfo=timezone.utc)
    normalised = normalize_workflow_timeouts(timeouts(execution=H, run=20 * M))
    expiration = workflow_execution_expiration(start, normalised.execution)
    deadlines = workflow_run_deadlines(
        normalised,
        start_time=start,
        execution_expiration=expiration,
        first_workflow_task_backoff=26 * M,
    )
    assert deadlines == WorkflowRunDeadlines(
        execution_expiration=datetime(2026, 5, 4, 1, 4, tzinfo=timezone.utc),
        execution_time=datetime(2026, 5, 4, 0, 30, tzinfo=timezone.utc),
        run_expiration=datetime(2026, 5, 4, 0, 50, tzinfo=timezone.utc),
    )


def test_execution_expiration_is_rounded_to_the_millisecond() -> None:
    request = T + timedelta(microseconds=1_500)
    assert workflow_execution_expiration(request, H) == T + H + timedelta(milliseconds=2)
    request = T + timedelta(microseconds=1_499)
    assert workflow_execution_expiration(request, H) == T + H + timedelta(milliseconds=1)


def test_run_expiration_is_capped_at_the_chain_expiration() -> None:
    # A later run of the chain: the run clock would end after the chain's deadline.
    deadlines = workflow_run_deadlines(
        timeouts(H, H, 10 * S),
        start_time=T + 50 * M,
        execution_expiration=T + H,
        first_workflow_task_backoff=5 * M,
    )
    assert deadlines.execution_time == T + 55 * M
    assert deadlines.run_expiration == T + H


def test_no_run_timeout_means_no_run_expiration() -> None:
    deadlines = workflow_run_deadlines(timeouts(task=10 * S), start_time=T, execution_expiration=None)
    assert deadlines == WorkflowRunDeadlines(None, T, None)


# --- 3.3 what firing means ----------------------------------------------------------


def test_execution_timeout_times_out_the_chain() -> None:
    outcome = fire_execution_timeout(workflow_task_started=True)
    assert outcome == WorkflowTimedOut(RetryState.TIMEOUT, fail_started_workflow_task=True)
    assert outcome.status is WorkflowExecutionStatus.TIMED_OUT
    assert outcome.new_run is None


def test_run_timeout_failure_is_a_start_to_close_timeout() -> None:
    failure = run_timeout_failure()
    assert failure.message == RUN_TIMEOUT_MESSAGE == "workflow timeout"
    assert failure.timeout_type is TimeoutType.START_TO_CLOSE


def run_timeout(policy: RetryPolicy | None, **overrides) -> WorkflowTimedOut:
    arguments = dict(
        attempt=1,
        now=T + 10 * M,
        execution_expiration=T + H,
        previous_run_execution_time=T,
        workflow_task_started=False,
    )
    arguments.update(overrides)
    return fire_run_timeout(normalize_workflow_retry_policy(policy), **arguments)


def test_run_timeout_without_retry_policy_or_cron_ends_the_chain() -> None:
    assert run_timeout(None) == WorkflowTimedOut(RetryState.RETRY_POLICY_NOT_SET)


def test_run_timeout_is_retried_as_a_new_run() -> None:
    outcome = run_timeout(RetryPolicy(initial_interval=10 * S), attempt=2)
    assert outcome.retry_state is RetryState.IN_PROGRESS
    assert outcome.new_run == NewRun(ContinueAsNewInitiator.RETRY, 3, 20 * S)


def test_run_timeout_not_retryable_falls_back_to_cron() -> None:
    policy = RetryPolicy(non_retryable_error_types=("TemporalTimeout:StartToClose",))
    outcome = run_timeout(policy, cron_backoff=4 * M, workflow_task_started=True)
    assert outcome == WorkflowTimedOut(
        RetryState.NON_RETRYABLE_FAILURE,
        fail_started_workflow_task=True,
        new_run=NewRun(ContinueAsNewInitiator.CRON_SCHEDULE, 1, 4 * M),
    )


def test_run_timeout_whose_retry_would_pass_the_chain_deadline_tries_cron() -> None:
    outcome = run_timeout(
        RetryPolicy(initial_interval=10 * M), now=T + 55 * M, cron_backoff=M
    )
    assert outcome.retry_state is RetryState.TIMEOUT
    assert outcome.new_run == NewRun(ContinueAsNewInitiator.CRON_SCHEDULE, 1, M)


@pytest.mark.parametrize("now", [T + H, T + H + S], ids=["at", "after"])
def test_run_timeout_at_the_chain_deadline_ends_the_chain(now) -> None:
    outcome = run_timeout(RetryPolicy(), now=now, cron_backoff=M, workflow_task_started=True)
    assert outcome == WorkflowTimedOut(RetryState.TIMEOUT, fail_started_workflow_task=True)


def test_run_timeout_retry_keeps_runs_a_second_apart() -> None:
    outcome = run_timeout(
        RetryPolicy(initial_interval=timedelta(milliseconds=100)),
        now=T + timedelta(milliseconds=200),
    )
    assert outcome.new_run == NewRun(
        ContinueAsNewInitiator.RETRY, 2, timedelta(milliseconds=800)
    )


def test_workflow_task_start_to_close_timeout_schedules_the_next_attempt() -> None:
    retry = fire_workflow_task_timeout(TimeoutType.START_TO_CLOSE, attempt=1, sticky=False)
    assert retry == WorkflowTaskRetry(2, timeout_type=TimeoutType.START_TO_CLOSE)
    assert retry.transient


def test_sticky_workflow_task_timeout_keeps_the_attempt_and_clears_stickiness() -> None:
    retry = fire_workflow_task_timeout(TimeoutType.START_TO_CLOSE, attempt=1, sticky=True)
    assert retry == WorkflowTaskRetry(1, clear_sticky=True, timeout_type=TimeoutType.START_TO_CLOSE)
    assert not retry.transient


@pytest.mark.parametrize("sticky", [True, False])
def test_schedule_to_start_timeout_never_counts_an_attempt(sticky) -> None:
    retry = fire_workflow_task_timeout(TimeoutType.SCHEDULE_TO_START, attempt=3, sticky=sticky)
    assert retry == WorkflowTaskRetry(3, sticky, TimeoutType.SCHEDULE_TO_START)


@pytest.mark.parametrize("timeout_type", [TimeoutType.HEARTBEAT, TimeoutType.SCHEDULE_TO_CLOSE])
def test_workflow_tasks_have_no_other_timeouts(timeout_type) -> None:
    with pytest.raises(ValueError):
        fire_workflow_task_timeout(timeout_type, attempt=1, sticky=False)


def test_failed_workflow_task() -> None:
    assert fail_workflow_task(attempt=4, sticky=False) == WorkflowTaskRetry(5)
    assert fail_workflow_task(attempt=4, sticky=True) == WorkflowTaskRetry(4, clear_sticky=True)


# --- 3.4 task timeout per attempt ---------------------------------------------------

TASK_TIMEOUT_VECTORS = [
    ("attempt-1-plain", 1, 0.9, 10 * S),
    ("attempt-3-plain", 3, 0.9, 10 * S),
    ("attempt-4-no-jitter", 4, 0.0, 14 * S),  # 10 s + 0.8 x 5 s
    ("attempt-4-half-jitter", 4, 0.5, timedelta(seconds=14.5)),  # + 0.5 x 0.2 x 5 s
    ("attempt-5", 5, 0.0, 18 * S),  # 10 s + 0.8 x 10 s
    ("attempt-10", 10, 0.0, 10 * S + timedelta(seconds=256)),  # 0.8 x 320 s
    ("attempt-11-capped", 11, 0.0, 10 * S + 480 * S),  # 640 s capped at 600 s
    ("attempt-11-max-jitter", 11, 0.999, 10 * S + timedelta(seconds=599.88)),
    ("attempt-huge", 10**6, 0.0, 10 * S + 480 * S),
]


@pytest.mark.parametrize(
    ("attempt", "jitter", "expected"),
    [v[1:] for v in TASK_TIMEOUT_VECTORS],
    ids=[v[0] for v in TASK_TIMEOUT_VECTORS],
)
def test_task_timeout_for_attempt(attempt, jitter, expected) -> None:
    assert workflow_task_timeout_for_attempt(10 * S, attempt, jitter=jitter) == expected


@pytest.mark.parametrize("jitter", [-0.1, 1.0])
def test_task_timeout_jitter_must_be_in_unit_interval(jitter) -> None:
    with pytest.raises(ValueError):
        workflow_task_timeout_for_attempt(10 * S, 5, jitter=jitter)


def test_task_timeout_is_not_lengthened_when_the_maximum_is_below_five_seconds() -> None:
    assert workflow_task_timeout_for_attempt(10 * S, 6, jitter=0.5, maximum_interval=S) == 10 * S


# --- general rules ------------------------------------------------------------------

durations = st.one_of(
    st.just(NONE),
    st.integers(min_value=1, max_value=10**10).map(lambda ms: timedelta(milliseconds=ms)),
)
requested_timeouts = st.builds(WorkflowTimeouts, durations, durations, durations)


@given(requested_timeouts)
def test_normalised_timeouts_respect_their_bounds(requested) -> None:
    result = normalize_workflow_timeouts(requested)
    assert result.execution == requested.execution
    if result.execution > NONE:
        assert NONE < result.run <= result.execution
    else:
        assert result.run == requested.run
    assert NONE < result.task <= MAX_WORKFLOW_TASK_TIMEOUT
    if result.run > NONE:
        assert result.task <= result.run
    if requested.task == NONE and (result.run == NONE or result.run >= 10 * S):
        assert result.task == DEFAULT_WORKFLOW_TASK_TIMEOUT


@given(requested_timeouts)
def test_normalisation_is_idempotent(requested) -> None:
    once = normalize_workflow_timeouts(requested)
    assert normalize_workflow_timeouts(once) == once
    assert continue_as_new_timeouts(WorkflowTimeouts(), once) == once


@given(requested_timeouts, requested_timeouts)
def test_continue_as_new_keeps_the_chain_bounds(first, requested) -> None:
    current = normalize_workflow_timeouts(first)
    result = continue_as_new_timeouts(requested, current)
    assert result.execution == current.execution
    if result.execution > NONE:
        assert result.run <= result.execution
    assert NONE < result.task <= MAX_WORKFLOW_TASK_TIMEOUT


@given(requested_timeouts, st.integers(min_value=0, max_value=10**7))
def test_run_expiration_never_passes_execution_expiration(requested, backoff_ms) -> None:
    normalised = normalize_workflow_timeouts(requested)
    expiration = workflow_execution_expiration(T, normalised.execution)
    deadlines = workflow_run_deadlines(
        normalised,
        start_time=T,
        execution_expiration=expiration,
        first_workflow_task_backoff=timedelta(milliseconds=backoff_ms),
    )
    if expiration is not None:
        assert deadlines.run_expiration is not None
        assert deadlines.run_expiration <= expiration


@given(
    st.integers(min_value=1, max_value=120_000).map(lambda ms: timedelta(milliseconds=ms)),
    st.integers(min_value=1, max_value=10_000),
    st.floats(min_value=0.0, max_value=1.0, exclude_max=True),
)
def test_lengthened_task_timeout_stays_within_its_band(task, attempt, jitter) -> None:
    result = workflow_task_timeout_for_attempt(task, attempt, jitter=jitter)
    if attempt <= 3:
        assert result == task
        return
    extra = min(5 * S * 2 ** min(attempt - 4, 20), 10 * M)
    assert task + extra * 0.8 <= result < task + extra
    assert result <= task + 10 * M
