"""What happens when a workflow's timeouts fire (SEMANTICS.md 3.3), and how a failed or
timed-out workflow task is retried (3.4).

Each function returns what the engine writes; none of them fails the workflow because
workflow tasks keep failing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import ClassVar

from streamproc.semantics.enums import RetryState, TimeoutType
from streamproc.semantics.failures import TimeoutFailure
from streamproc.semantics.retry import RetryPolicy
from streamproc.semantics.workflow_events import ContinueAsNewInitiator
from streamproc.semantics.workflow_ids import WorkflowExecutionStatus
from streamproc.semantics.workflow_retry import plan_workflow_retry

__all__ = [
    "RUN_TIMEOUT_MESSAGE",
    "run_timeout_failure",
    "NewRun",
    "WorkflowTimedOut",
    "WorkflowTaskRetry",
    "fire_execution_timeout",
    "fire_run_timeout",
    "fire_workflow_task_timeout",
    "fail_workflow_task",
]

#: Message of the timeout failure a run timeout builds.
RUN_TIMEOUT_MESSAGE = "workflow timeout"


def run_timeout_failure() -> TimeoutFailure:
    """The failure a run timeout builds; the retry decision classifies it like any
    START_TO_CLOSE timeout (retryable unless ``TemporalTimeout:StartToClose`` is listed)."""
    return TimeoutFailure(message=RUN_TIMEOUT_MESSAGE, timeout_type=TimeoutType.START_TO_CLOSE)


@dataclass(frozen=True)
class NewRun:
    """The run that follows a timed-out one, with the same workflow id.

    A retry run has the next attempt number; a cron run starts again at attempt 1.
    """

    initiator: ContinueAsNewInitiator
    attempt: int
    first_workflow_task_backoff: timedelta


@dataclass(frozen=True)
class WorkflowTimedOut:
    """Close the run with ``WorkflowExecutionTimedOut(retry_state, new_execution_run_id)``.

    If ``fail_started_workflow_task``, a started workflow task is first closed with
    ``WorkflowTaskFailed(cause=FORCE_CLOSE_COMMAND)``. ``new_run`` is set when a retry
    or cron run follows (its run id goes on the closing event); otherwise the chain
    ends. Timers and activities of the run are dropped either way.
    """

    status: ClassVar[WorkflowExecutionStatus] = WorkflowExecutionStatus.TIMED_OUT

    retry_state: RetryState
    fail_started_workflow_task: bool = False
    new_run: NewRun | None = None


def fire_execution_timeout(*, workflow_task_started: bool) -> WorkflowTimedOut:
    """The chain's deadline passed: time out with ``TIMEOUT``; no retry, no cron run."""
    return WorkflowTimedOut(RetryState.TIMEOUT, fail_started_workflow_task=workflow_task_started)


def fire_run_timeout(
    retry_policy: RetryPolicy | None,
    *,
    attempt: int,
    now: datetime,
    execution_expiration: datetime | None,
    previous_run_execution_time: datetime,
    workflow_task_started: bool,
    cron_backoff: timedelta | None = None,
) -> WorkflowTimedOut:
    """The run's deadline passed at ``now``.

    If the execution deadline has not passed, the :func:`run_timeout_failure` is
    offered to the retry policy (``retry_policy`` normalised, ``attempt`` the run's);
    if no retry follows and the chain has a cron schedule, ``cron_backoff`` (the delay
    to the next cron time, computed by the caller; ``None`` without a schedule) starts
    the next cron run. The closing event carries the retry decision's state, even when
    a cron run follows; ``TIMEOUT`` if the execution deadline had passed.
    """
    if execution_expiration is not None and execution_expiration <= now:
        return fire_execution_timeout(workflow_task_started=workflow_task_started)
    plan = plan_workflow_retry(
        retry_policy,
        attempt=attempt,
        failure=run_timeout_failure(),
        now=now,
        execution_expiration=execution_expiration,
        previous_run_execution_time=previous_run_execution_time,
    )
    new_run = None
    if plan.next_attempt is not None and plan.first_workflow_task_backoff is not None:
        new_run = NewRun(
            ContinueAsNewInitiator.RETRY, plan.next_attempt, plan.first_workflow_task_backoff
        )
    elif cron_backoff is not None:
        new_run = NewRun(ContinueAsNewInitiator.CRON_SCHEDULE, 1, cron_backoff)
    return WorkflowTimedOut(plan.retry_state, workflow_task_started, new_run)


@dataclass(frozen=True)
class WorkflowTaskRetry:
    """Schedule the next workflow task; the workflow itself does not fail.

    ``timeout_type`` goes on ``WorkflowTaskTimedOut`` (``None`` after a
    ``WorkflowTaskFailed``). A task that failed on a sticky queue is retried on the
    normal queue without counting an attempt (``clear_sticky``). Tasks with attempt
    2 or more are *transient*: their Scheduled and Started events are written only
    when such a task completes.
    """

    next_attempt: int
    clear_sticky: bool = False
    timeout_type: TimeoutType | None = None

    @property
    def transient(self) -> bool:
        return self.next_attempt >= 2


def fail_workflow_task(*, attempt: int, sticky: bool) -> WorkflowTaskRetry:
    """A workflow task failed (``WorkflowTaskFailed``): next attempt, unless sticky."""
    if sticky:
        return WorkflowTaskRetry(attempt, clear_sticky=True)
    return WorkflowTaskRetry(attempt + 1)


def fire_workflow_task_timeout(
    timeout_type: TimeoutType, *, attempt: int, sticky: bool
) -> WorkflowTaskRetry:
    """A workflow task timer fired.

    START_TO_CLOSE counts like a failure (next attempt, unless the task was sticky).
    SCHEDULE_TO_START exists only for sticky (and speculative) tasks: the task goes
    back to the normal queue with the same attempt.
    """
    if timeout_type is TimeoutType.START_TO_CLOSE:
        retry = fail_workflow_task(attempt=attempt, sticky=sticky)
    elif timeout_type is TimeoutType.SCHEDULE_TO_START:
        retry = WorkflowTaskRetry(attempt, clear_sticky=sticky)
    else:
        raise ValueError(f"workflow tasks have no {timeout_type.name} timeout")
    return WorkflowTaskRetry(retry.next_attempt, retry.clear_sticky, timeout_type)
