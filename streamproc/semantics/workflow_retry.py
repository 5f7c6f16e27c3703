"""Retrying a failed workflow run as a new run (SEMANTICS.md 1.4 and 1.7).

The decision itself is :func:`streamproc.semantics.retry.workflow_retry_decision`;
this module adds what happens around it: the chain's absolute deadline, the spacing
enforced between runs, and the attempt number of the run that follows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from streamproc.semantics.durations import ZERO
from streamproc.semantics.enums import RetryState
from streamproc.semantics.failures import Failure
from streamproc.semantics.retry import RetryPolicy, workflow_retry_decision

__all__ = [
    "WORKFLOW_ID_REUSE_MINIMAL_INTERVAL",
    "WorkflowRetryPlan",
    "workflow_execution_expiration",
    "first_workflow_task_backoff",
    "plan_workflow_retry",
]

#: ``history.workflowIdReuseMinimalInterval``: least time between one run's effective
#: start and the next run's first workflow task (retry, cron and continue-as-new).
WORKFLOW_ID_REUSE_MINIMAL_INTERVAL = timedelta(seconds=1)

_ONE_MS = timedelta(milliseconds=1)


def workflow_execution_expiration(
    request_time: datetime, execution_timeout: timedelta
) -> datetime | None:
    """The chain's deadline: request time plus execution timeout, rounded to the
    millisecond (halves round up, like Go's ``Time.Round``); ``None`` when the timeout
    is zero. It is fixed for the whole chain of retries, cron runs and continue-as-new.
    """
    if execution_timeout <= ZERO:
        return None
    deadline = request_time + execution_timeout
    sub_ms = timedelta(microseconds=deadline.microsecond % 1000)
    rounded_down = deadline - sub_ms
    return rounded_down + _ONE_MS if sub_ms * 2 >= _ONE_MS else rounded_down


def first_workflow_task_backoff(
    interval: timedelta,
    *,
    now: datetime,
    previous_run_execution_time: datetime,
    minimal_interval: timedelta = WORKFLOW_ID_REUSE_MINIMAL_INTERVAL,
) -> timedelta:
    """Delay of the next run's first workflow task.

    ``previous_run_execution_time`` is when the previous run became executable (its
    start time plus its own first-task backoff, or its start time). If that run's
    lifetime plus ``interval`` is shorter than ``minimal_interval``, the delay is
    stretched so that the two are ``minimal_interval`` apart; this stops tight loops.
    """
    lifetime = now - previous_run_execution_time
    if lifetime + interval < minimal_interval:
        return minimal_interval - lifetime
    return interval


@dataclass(frozen=True)
class WorkflowRetryPlan:
    """What follows a failed run.

    ``retry_state`` goes on the closing event (``WorkflowExecutionFailed`` or
    ``WorkflowExecutionTimedOut``). When it is ``IN_PROGRESS`` a new run with
    ``next_attempt`` starts at once, its first workflow task delayed by
    ``first_workflow_task_backoff``; otherwise both are ``None`` (a cron schedule, if
    any, is then tried by the caller).
    """

    retry_state: RetryState
    next_attempt: int | None = None
    first_workflow_task_backoff: timedelta | None = None


def plan_workflow_retry(
    policy: RetryPolicy | None,
    *,
    attempt: int,
    failure: Failure | None,
    now: datetime,
    execution_expiration: datetime | None,
    previous_run_execution_time: datetime,
) -> WorkflowRetryPlan:
    """Combine :func:`workflow_retry_decision` with the run-spacing rule."""
    decision = workflow_retry_decision(
        policy,
        attempt=attempt,
        failure=failure,
        now=now,
        execution_expiration=execution_expiration,
    )
    if decision.delay is None:
        return WorkflowRetryPlan(decision.retry_state)
    return WorkflowRetryPlan(
        RetryState.IN_PROGRESS,
        next_attempt=attempt + 1,
        first_workflow_task_backoff=first_workflow_task_backoff(
            decision.delay, now=now, previous_run_execution_time=previous_run_execution_time
        ),
    )
