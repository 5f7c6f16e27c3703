"""Workflow timeouts: normalisation, deadlines, and the lengthened timeout of a repeatedly
failing workflow task (SEMANTICS.md 3.1, 3.2, 3.4). What each timeout does when it fires
(3.3) is in :mod:`~streamproc.semantics.workflow_timeout_outcomes`.

The three timeouts, with ``0`` meaning "none":

* ``execution``: the whole chain of runs (retries, cron runs, continue-as-new), from the
  start request; fixed once, never retried.
* ``run``: one run, from the moment it becomes executable (after its first-task
  backoff); may lead to a retry or the next cron run.
* ``task``: one workflow task, start to close; default 10 s, at most 120 s. A timed-out
  task is scheduled again; the workflow itself never fails because of it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from streamproc.semantics.durations import (
    INT64_MAX,
    ZERO,
    from_nanoseconds,
    to_nanoseconds,
    validate_and_cap,
)
from streamproc.semantics.errors import InvalidArgument

__all__ = [
    "DEFAULT_WORKFLOW_TASK_TIMEOUT",
    "MAX_WORKFLOW_TASK_TIMEOUT",
    "WORKFLOW_TASK_RETRY_INITIAL_INTERVAL",
    "WORKFLOW_TASK_RETRY_MAX_INTERVAL",
    "WORKFLOW_TASK_CRITICAL_ATTEMPT",
    "WorkflowTimeouts",
    "normalize_workflow_timeouts",
    "normalize_child_workflow_timeouts",
    "continue_as_new_timeouts",
    "validate_workflow_start_delay",
    "WorkflowRunDeadlines",
    "workflow_run_deadlines",
    "workflow_task_timeout_for_attempt",
]

#: ``history.defaultWorkflowTaskTimeout``: the task timeout when none is given.
DEFAULT_WORKFLOW_TASK_TIMEOUT = timedelta(seconds=10)
#: Longer task timeouts are capped silently, without an error.
MAX_WORKFLOW_TASK_TIMEOUT = timedelta(seconds=120)
#: Attempts up to this one use the plain task timeout (``workflowTaskRetryBackoffMinAttempts``).
PLAIN_TIMEOUT_ATTEMPTS = 3
#: First lengthening of the task timeout, at attempt 4.
WORKFLOW_TASK_RETRY_INITIAL_INTERVAL = timedelta(seconds=5)
#: ``history.workflowTaskRetryMaxInterval``: the lengthening never exceeds this.
WORKFLOW_TASK_RETRY_MAX_INTERVAL = timedelta(minutes=10)
#: ``history.workflowTaskCriticalAttempt``: from here on the server only logs louder.
WORKFLOW_TASK_CRITICAL_ATTEMPT = 10


@dataclass(frozen=True)
class WorkflowTimeouts:
    """Execution, run and task timeouts; ``timedelta(0)`` means unset / no limit."""

    execution: timedelta = ZERO
    run: timedelta = ZERO
    task: timedelta = ZERO


def _apply_defaults(
    execution: timedelta, run: timedelta, task: timedelta, default_task_timeout: timedelta
) -> WorkflowTimeouts:
    # Same order as the server: run is fitted to execution first, and the task timeout
    # is then fitted to the *fitted* run timeout.
    if execution > ZERO:
        run = execution if run == ZERO else min(run, execution)
    if task == ZERO:
        task = default_task_timeout
    task = min(task, MAX_WORKFLOW_TASK_TIMEOUT)
    if run > ZERO:
        task = min(task, run)
    return WorkflowTimeouts(execution, run, task)


def normalize_workflow_timeouts(
    requested: WorkflowTimeouts,
    *,
    default_task_timeout: timedelta = DEFAULT_WORKFLOW_TASK_TIMEOUT,
) -> WorkflowTimeouts:
    """The timeouts a StartWorkflowExecution (or SignalWithStart) request runs with.

    1. each timeout must be non-negative (checked execution, run, task) and is capped
       at 100 years;
    2. with an execution timeout, run becomes execution if unset, else the smaller;
    3. an unset task timeout becomes ``default_task_timeout``; it is then capped at
       120 s silently, and at the run timeout if there is one.

    Raises :class:`InvalidArgument`, e.g. ``An invalid WorkflowRunTimeoutSeconds is set
    on request. cause: negative duration``.
    """
    execution, run, task = (
        validate_and_cap(value, f"An invalid Workflow{name}TimeoutSeconds is set on request. cause")
        for value, name in (
            (requested.execution, "Execution"),
            (requested.run, "Run"),
            (requested.task, "Task"),
        )
    )
    return _apply_defaults(execution, run, task, default_task_timeout)


def _reject_negative(value: timedelta, name: str) -> timedelta:
    # Commands (child start, continue-as-new) use shorter texts than client requests.
    if value < ZERO:
        raise InvalidArgument(f"Invalid Workflow{name}Timeout.")
    return value


def normalize_child_workflow_timeouts(
    requested: WorkflowTimeouts,
    *,
    default_task_timeout: timedelta = DEFAULT_WORKFLOW_TASK_TIMEOUT,
) -> WorkflowTimeouts:
    """The timeouts of a StartChildWorkflowExecution command: the same rules as a start
    request, with the command's error texts (``Invalid WorkflowRunTimeout.``), which
    fail the parent's workflow task rather than a client call."""
    return _apply_defaults(
        _reject_negative(requested.execution, "Execution"),
        _reject_negative(requested.run, "Run"),
        _reject_negative(requested.task, "Task"),
        default_task_timeout,
    )


def continue_as_new_timeouts(
    requested: WorkflowTimeouts,
    current: WorkflowTimeouts,
    *,
    default_task_timeout: timedelta = DEFAULT_WORKFLOW_TASK_TIMEOUT,
) -> WorkflowTimeouts:
    """The timeouts of the run a ContinueAsNewWorkflowExecution command starts.

    ``current`` is the continuing run's (normalised) timeouts. The execution timeout
    is inherited and ``requested.execution`` is ignored (the chain's absolute
    expiration is inherited as well); an unset run or task timeout is inherited; then
    the rules of :func:`normalize_workflow_timeouts` apply.

    Raises :class:`InvalidArgument` (``Invalid WorkflowRunTimeout.``,
    ``Invalid WorkflowTaskTimeout.``).
    """
    run = _reject_negative(requested.run, "Run")
    task = _reject_negative(requested.task, "Task")
    return _apply_defaults(
        current.execution,
        run if run > ZERO else current.run,
        task if task > ZERO else current.task,
        default_task_timeout,
    )


def validate_workflow_start_delay(
    cron_schedule: str, start_delay: timedelta | None
) -> timedelta | None:
    """Check a start request's ``workflow_start_delay`` (``None``: not set).

    A delay, even zero, may not be combined with a cron schedule; a negative one is
    rejected; a huge one is capped at 100 years. Raises :class:`InvalidArgument`.
    """
    if cron_schedule and start_delay is not None:
        raise InvalidArgument("CronSchedule and WorkflowStartDelay may not be used together.")
    if start_delay is None:
        return None
    return validate_and_cap(
        start_delay, "An invalid WorkflowStartDelaySeconds is set on request. cause"
    )


# --- deadlines (3.2) -----------------------------------------------------------------


@dataclass(frozen=True)
class WorkflowRunDeadlines:
    """The absolute times of one run; ``None`` means no deadline.

    ``execution_time`` is when the run becomes executable (its first workflow task is
    scheduled): start time plus first-task backoff.
    """

    execution_expiration: datetime | None
    execution_time: datetime
    run_expiration: datetime | None


def workflow_run_deadlines(
    timeouts: WorkflowTimeouts,
    *,
    start_time: datetime,
    execution_expiration: datetime | None,
    first_workflow_task_backoff: timedelta = ZERO,
) -> WorkflowRunDeadlines:
    """Deadlines of a run created at ``start_time``.

    ``execution_expiration`` is the chain's, fixed when the chain started (see
    :func:`~streamproc.semantics.workflow_retry.workflow_execution_expiration`) and
    passed on unchanged to every later run. The run clock starts when the run becomes
    executable, not when it is created, and never runs past the execution expiration.
    """
    execution_time = start_time + first_workflow_task_backoff
    run_expiration = None
    if timeouts.run > ZERO:
        run_expiration = execution_time + timeouts.run
        if execution_expiration is not None and run_expiration > execution_expiration:
            run_expiration = execution_expiration
    return WorkflowRunDeadlines(execution_expiration, execution_time, run_expiration)


def workflow_task_timeout_for_attempt(
    task_timeout: timedelta,
    attempt: int,
    *,
    jitter: float,
    maximum_interval: timedelta = WORKFLOW_TASK_RETRY_MAX_INTERVAL,
) -> timedelta:
    """Start-to-close timeout of workflow task attempt ``attempt`` (1-based).

    Attempts 1-3 use ``task_timeout``. From attempt 4 the server adds
    ``x = min(5 s x 2 ** (attempt - 4), maximum_interval)`` jittered to
    ``0.8 x + j``, where ``j`` is a whole number of nanoseconds drawn from
    ``[0, int(0.2 x))``. The draw is passed in as ``jitter`` in ``[0, 1)``:
    ``j = floor(jitter x int(0.2 x))``, so ``jitter=0`` gives the shortest timeout.
    (If ``maximum_interval`` is below 5 s the server adds nothing.)
    """
    if not 0.0 <= jitter < 1.0:
        raise ValueError(f"jitter must be in [0, 1), got {jitter}")
    if attempt <= PLAIN_TIMEOUT_ATTEMPTS:
        return task_timeout
    initial_ns = to_nanoseconds(WORKFLOW_TASK_RETRY_INITIAL_INTERVAL)
    exponent = attempt - PLAIN_TIMEOUT_ATTEMPTS - 1
    # float64 like the server; 2 ** exponent is exact, so only overflow needs care.
    try:
        interval = math.ldexp(float(initial_ns), exponent)
    except OverflowError:
        interval = math.inf
    maximum_ns = to_nanoseconds(maximum_interval)
    if maximum_ns > 0:
        interval = min(interval, float(maximum_ns))
    interval = min(interval, float(INT64_MAX))
    if int(interval) < initial_ns:
        return task_timeout
    portion = max(int(0.2 * interval), 1)
    extra_ns = int(interval * 0.8 + float(int(jitter * portion)))
    return task_timeout + from_nanoseconds(extra_ns)
