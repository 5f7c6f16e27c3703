"""Where a failed local activity attempt is retried: in the worker, or after a durable timer.

A local activity runs inside a workflow task, so a short backoff is waited out in the
worker and the next attempt runs in the same task. A backoff longer than the local retry
threshold (Temporal's default: one minute) would hold the task for nothing: the attempt's
failure is recorded with the backoff, the workflow starts a timer, and the next attempt
runs in a later task. Which attempts are retried at all follows the activity retry rules
(`activity_retry_decision`), with the schedule-to-close deadline bounding every attempt.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from streamproc.semantics.enums import RetryState
from streamproc.semantics.failures import Failure
from streamproc.semantics.retry import RetryPolicy, activity_retry_decision

__all__ = ["DEFAULT_LOCAL_RETRY_THRESHOLD", "LocalRetryPlan", "plan_local_retry"]

#: Temporal's default ``local_retry_threshold``.
DEFAULT_LOCAL_RETRY_THRESHOLD = timedelta(minutes=1)


@dataclass(frozen=True)
class LocalRetryPlan:
    """`retry_state` IN_PROGRESS: retry after `delay`, here (`in_worker`) or after a timer."""

    retry_state: RetryState
    delay: timedelta | None = None
    in_worker: bool = False

    @property
    def retries(self) -> bool:
        return self.retry_state is RetryState.IN_PROGRESS


def plan_local_retry(policy: RetryPolicy, *, attempt: int, failure: Failure | None, now: datetime,
                     expiration: datetime | None, local_retry_threshold: timedelta) -> LocalRetryPlan:
    """What follows the failed `attempt`; `expiration` is the first schedule time plus the
    schedule-to-close timeout (None without one)."""
    decision = activity_retry_decision(policy, attempt=attempt, failure=failure, now=now, expiration=expiration)
    if not decision.should_retry:
        return LocalRetryPlan(decision.retry_state)
    delay = decision.delay or timedelta(0)
    return LocalRetryPlan(decision.retry_state, delay, in_worker=delay <= local_retry_threshold)
