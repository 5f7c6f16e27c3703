"""Workflow task records and histories as the engine writes them, for worker tests."""

from __future__ import annotations

from typing import Any

import orjson

from streamproc.protocol.records import Record, RecordType, ValueType, WorkflowIntent

RUN_KEY = 7


def event(event_id: int, event_type: str, **attributes: Any) -> dict[str, Any]:
    return {"event_id": event_id, "event_type": event_type, "event_time_ms": 1_000 + event_id,
            "attributes": attributes}


def first_task_history() -> list[dict[str, Any]]:
    return [event(1, "WORKFLOW_EXECUTION_STARTED", workflow_type="Order", task_queue="q", input="[1]"),
            event(2, "WORKFLOW_TASK_SCHEDULED", task_queue="q", start_to_close_timeout_ms=10_000, attempt=1)]


def after_completed_task(history: list[dict[str, Any]], *more: tuple[str, dict[str, Any]],
                         started_by: int | None = None, identity: str = "worker-1") -> list[dict[str, Any]]:
    """`history` answered (by the worker `identity`): STARTED and COMPLETED for its last
    task, `more`, a new SCHEDULED."""
    scheduled = history[-1]["event_id"] if started_by is None else started_by
    n = len(history)
    out = [*history, event(n + 1, "WORKFLOW_TASK_STARTED", scheduled_event_id=scheduled, identity=identity),
           event(n + 2, "WORKFLOW_TASK_COMPLETED", scheduled_event_id=scheduled, started_event_id=n + 1)]
    for event_type, attributes in more:
        out.append(event(len(out) + 1, event_type, **attributes))
    out.append(event(len(out) + 1, "WORKFLOW_TASK_SCHEDULED", task_queue="q", attempt=1))
    return out


def task_records(history: list[dict[str, Any]], *, pages: int = 1, run_id: str = "run-1",
                 workflow_type: str = "Order", attempt: int = 1) -> list[Record]:
    """The WORKFLOW_TASK record(s) of a task showing `history` (events from the id of its
    first one on), split into `pages`."""
    size = -(-len(history) // pages)
    return [Record(RecordType.COMMAND, ValueType.WORKFLOW, WorkflowIntent.WORKFLOW_TASK, {
        "workflow_id": "wf-1", "run_id": run_id, "workflow_type": workflow_type, "task_queue": "q",
        "attempt": attempt, "scheduled_event_id": history[-1]["event_id"],
        "first_event_id": history[0]["event_id"],
        "history": orjson.dumps(history[n * size:(n + 1) * size]).decode(), "page": n, "pages": pages},
        key=RUN_KEY) for n in range(pages)]
