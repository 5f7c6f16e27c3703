"""The executions of a namespace, as the events topic tells them (``streamproc workflow list``).

Each run's WORKFLOW_EXECUTION_STARTED and close event are on the events topic, so a
listing reads every events partition up to its current end and folds those two into one
row per run. It sees what the topic still holds (its retention, a week by default).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from datetime import UTC, datetime

from streamproc.client.workflow_events import WorkflowEvent, WorkflowEventScanner
from streamproc.semantics.workflow_ids import WorkflowExecutionStatus

__all__ = ["ExecutionSummary", "WorkflowExecutionCount", "summarize_executions", "list_executions"]

#: The status each close event leaves a run in.
_STATUS_OF_CLOSE = {
    "WORKFLOW_EXECUTION_COMPLETED": WorkflowExecutionStatus.COMPLETED,
    "WORKFLOW_EXECUTION_FAILED": WorkflowExecutionStatus.FAILED,
    "WORKFLOW_EXECUTION_TIMED_OUT": WorkflowExecutionStatus.TIMED_OUT,
    "WORKFLOW_EXECUTION_CANCELED": WorkflowExecutionStatus.CANCELED,
    "WORKFLOW_EXECUTION_TERMINATED": WorkflowExecutionStatus.TERMINATED,
    "WORKFLOW_EXECUTION_CONTINUED_AS_NEW": WorkflowExecutionStatus.CONTINUED_AS_NEW,
}


@dataclasses.dataclass
class ExecutionSummary:
    """One run: who it is, what it runs, and how far it got."""

    workflow_id: str
    run_id: str
    workflow_type: str = ""
    task_queue: str = ""
    status: WorkflowExecutionStatus = WorkflowExecutionStatus.RUNNING
    start_time_ms: int = 0
    close_time_ms: int = 0
    history_length: int = 0

    # Temporal's names (``WorkflowExecution`` of ``list_workflows``) ----------------------
    @property
    def id(self) -> str:
        return self.workflow_id

    @property
    def start_time(self) -> datetime | None:
        return datetime.fromtimestamp(self.start_time_ms / 1000, UTC) if self.start_time_ms else None

    @property
    def close_time(self) -> datetime | None:
        return datetime.fromtimestamp(self.close_time_ms / 1000, UTC) if self.close_time_ms else None

    def as_dict(self) -> dict:
        return {**dataclasses.asdict(self), "status": self.status.name}


@dataclasses.dataclass(frozen=True)
class WorkflowExecutionCount:
    """What `count_workflows` answers, as Temporal's (no grouping: `groups` is empty)."""

    count: int
    groups: tuple = ()


def summarize_executions(events: Iterable[WorkflowEvent]) -> list[ExecutionSummary]:
    """One summary per run seen, newest start first; a run whose start is no longer on the
    topic is listed with what its later events say."""
    runs: dict[str, ExecutionSummary] = {}
    for event in events:
        run = runs.get(event.run_id)
        if run is None:
            run = runs[event.run_id] = ExecutionSummary(event.workflow_id, event.run_id)
        run.history_length = max(run.history_length, event.event_id)
        if event.event_type == "WORKFLOW_EXECUTION_STARTED":
            run.workflow_type = event.attributes.get("workflow_type", "")
            run.task_queue = event.attributes.get("task_queue", "")
            run.start_time_ms = event.event_time_ms
        elif event.event_type in _STATUS_OF_CLOSE:
            run.status = _STATUS_OF_CLOSE[event.event_type]
            run.close_time_ms = event.event_time_ms
    return sorted(runs.values(), key=lambda r: (r.start_time_ms, r.workflow_id), reverse=True)


def list_executions(bootstrap: str, events_topic: str, partitions: int,
                    group_prefix: str = "streamproc", timeout: float = 30) -> list[ExecutionSummary]:
    """Every run the events topic holds now."""
    events: list[WorkflowEvent] = []
    for partition in range(partitions):
        with WorkflowEventScanner(bootstrap, events_topic, partition, group_prefix=group_prefix) as scanner:
            events += scanner.existing(None, timeout)
    return summarize_executions(events)
