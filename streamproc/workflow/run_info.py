"""`workflow.info()`: what a run knows about itself, read from its WorkflowExecutionStarted."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

from streamproc.protocol.wire_values import policy_from_record
from streamproc.semantics.retry import RetryPolicy

__all__ = ["Info", "ParentInfo"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclasses.dataclass(frozen=True, slots=True)
class ParentInfo:
    """The workflow that started this one as a child (Temporal's ``workflow.ParentInfo``)."""

    namespace: str
    run_id: str
    workflow_id: str


@dataclasses.dataclass(frozen=True, slots=True)
class Info:
    """The run's identity and settings, as Temporal's ``workflow.Info``.

    Timeouts are None when the run has none (0 on the wire). Temporal's fields that have
    no counterpart here yet (headers, search attributes, priority, root) are left out.
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
    #: The worker's namespace (its topics' prefix).
    namespace: str = ""
    #: The parent, for a child workflow.
    parent: ParentInfo | None = None
    #: The run's retry policy, None when it has none.
    retry_policy: RetryPolicy | None = None
    #: When the workflow execution started (this run's start: there is no separate first task time).
    workflow_start_time: datetime | None = None

    def logger_details(self) -> dict[str, Any]:
        """What `workflow.logger` adds to each line, as Temporal's."""
        return {"attempt": self.attempt, "namespace": self.namespace, "run_id": self.run_id,
                "task_queue": self.task_queue, "workflow_id": self.workflow_id, "workflow_type": self.workflow_type}

    @staticmethod
    def from_started_event(event: dict[str, Any], run_id: str | None = None, namespace: str = "") -> Info:
        """`run_id` defaults to the event's ``original_execution_run_id`` (this run's own id)."""
        a = event.get("attributes") or {}
        own_run_id = run_id or a.get("original_execution_run_id") or ""
        start_time = _EPOCH + timedelta(milliseconds=event.get("event_time_ms", 0))
        parent = a.get("parent_workflow_execution")
        return Info(
            workflow_id=a.get("workflow_id", ""), run_id=own_run_id,
            workflow_type=a.get("workflow_type", ""), task_queue=a.get("task_queue", ""),
            attempt=a.get("attempt") or 1,
            start_time=start_time,
            execution_timeout=_timeout(a.get("workflow_execution_timeout_ms")),
            run_timeout=_timeout(a.get("workflow_run_timeout_ms")),
            task_timeout=_timeout(a.get("workflow_task_timeout_ms")),
            first_execution_run_id=a.get("first_execution_run_id") or own_run_id,
            continued_run_id=a.get("continued_execution_run_id") or None,
            cron_schedule=a.get("cron_schedule") or None,
            namespace=namespace,
            parent=ParentInfo(namespace, parent.get("run_id", ""), parent.get("workflow_id", "")) if parent else None,
            retry_policy=policy_from_record(a["retry_policy"]) if a.get("retry_policy") else None,
            workflow_start_time=start_time)


def _timeout(ms: int | None) -> timedelta | None:
    return timedelta(milliseconds=ms) if ms else None
