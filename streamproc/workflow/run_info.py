"""`workflow.info()`: what a run knows about itself, read from its WorkflowExecutionStarted."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = ["Info"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclasses.dataclass(frozen=True, slots=True)
class Info:
    """The run's identity and settings, as Temporal's ``workflow.Info``.

    Timeouts are None when the run has none (0 on the wire).
    """

    workflow_id: str
    run_id: str
    workflow_type: str
    task_queue: str
    attempt: int
    start_time: datetime
    execution_timeout: timedelta | None
    run_timeout: timedelta | None
    task_timeout: timedelta | None
    first_execution_run_id: str
    continued_run_id: str | None
    #: A cron workflow's schedule, None for any other workflow.
    cron_schedule: str | None = None

    @staticmethod
    def from_started_event(event: dict[str, Any], run_id: str | None = None) -> Info:
        """`run_id` defaults to the event's ``original_execution_run_id`` (this run's own id)."""
        a = event.get("attributes") or {}
        own_run_id = run_id or a.get("original_execution_run_id") or ""
        return Info(
            workflow_id=a.get("workflow_id", ""), run_id=own_run_id,
            workflow_type=a.get("workflow_type", ""), task_queue=a.get("task_queue", ""),
            attempt=a.get("attempt") or 1,
            start_time=_EPOCH + timedelta(milliseconds=event.get("event_time_ms", 0)),
            execution_timeout=_timeout(a.get("workflow_execution_timeout_ms")),
            run_timeout=_timeout(a.get("workflow_run_timeout_ms")),
            task_timeout=_timeout(a.get("workflow_task_timeout_ms")),
            first_execution_run_id=a.get("first_execution_run_id") or own_run_id,
            continued_run_id=a.get("continued_execution_run_id") or None,
            cron_schedule=a.get("cron_schedule") or None)


def _timeout(ms: int | None) -> timedelta | None:
    return timedelta(milliseconds=ms) if ms else None
