"""Cron workflows (SEMANTICS.md 7.2): when each run of a chain with a `cron_schedule` starts.

The first run is created at once and waits for the first cron time after the start;
each later run is created when the previous one completes, fails without a retry or
hits its run timeout without a retry, and waits for the first cron time not before
its close, counted from the previous run's execution time (missed times are skipped).
Cancel, terminate and the execution timeout end the chain; so does a schedule with no
time left. The waiting is the run's first-task backoff (BACKOFF_START), as for retries.
"""

from __future__ import annotations

from datetime import timedelta

from streamproc.engine.processing import ProcessingContext
from streamproc.protocol.wire_values import to_datetime
from streamproc.semantics.cron_workflow import cron_backoff
from streamproc.semantics.workflow_retry import first_workflow_task_backoff
from streamproc.state.workflow_run import WorkflowRun


_NO_BACKOFF = timedelta(0)


def first_run_backoff(cron_schedule: str, now_ms: int) -> timedelta:
    """The first run's wait: to the first cron time strictly after the start (a start on a
    boundary waits a whole period), rounded up to a whole second; none without a schedule."""
    if not cron_schedule:
        return _NO_BACKOFF
    now = to_datetime(now_ms)
    return cron_backoff(cron_schedule, now, now) or _NO_BACKOFF


def next_run_backoff(ctx: ProcessingContext, run: WorkflowRun) -> timedelta | None:
    """The wait of the cron run that follows `run`, closing now; None when the chain has
    no cron schedule or the schedule no time left. The one-second spacing between runs
    of an id (SEMANTICS.md 1.7) applies on top."""
    if not run.cron_schedule:
        return None
    now = to_datetime(ctx.now_ms)
    executed = to_datetime(run.execution_time_ms)
    interval = cron_backoff(run.cron_schedule, executed, now)
    if interval is None:
        return None
    return first_workflow_task_backoff(interval, now=now, previous_run_execution_time=executed)


def started_with_completion_result(ctx: ProcessingContext, run_key: int) -> str | None:
    """The last completion result the run was started with, read from its
    WORKFLOW_EXECUTION_STARTED as Temporal does: a run that fails or times out passes it on."""
    started = ctx.history.events(run_key, 1, 1)[0]
    return started["attributes"].get("last_completion_result")
