"""What a workflow started by a schedule owes it (SEMANTICS.md 8.9): word if it could not
start, and, when its chain of runs ends (after retries; a continue-as-new hands over to
the next run), how. Each is a command to the schedule's partition, committed with the
fact. A start that succeeds needs no answer: the schedule chose the run's id."""

from __future__ import annotations

from typing import Any

import orjson

from streamproc.engine.processing import ProcessingContext
from streamproc.protocol.records import ScheduleIntent, ValueType
from streamproc.semantics.workflow_events import EventType
from streamproc.state.workflow_run import WorkflowRun

#: The status a schedule records for each way a chain can end.
CLOSE_STATUS = {
    EventType.WORKFLOW_EXECUTION_COMPLETED: "COMPLETED",
    EventType.WORKFLOW_EXECUTION_FAILED: "FAILED",
    EventType.WORKFLOW_EXECUTION_CANCELED: "CANCELED",
    EventType.WORKFLOW_EXECUTION_TIMED_OUT: "TIMED_OUT",
    EventType.WORKFLOW_EXECUTION_TERMINATED: "TERMINATED",
}


def scheduled_run_id(ctx: ProcessingContext, scheduled_by: dict | None) -> str | None:
    """The run id a schedule chose for its start, so it knows the run without waiting for
    an answer (one command fewer per action); None when unset or already in use."""
    run_id = (scheduled_by or {}).get("run_id")
    if not run_id or ctx.workflows.run_key_of(run_id) is not None:
        return None
    return run_id


def tell_schedule_start_failed(ctx: ProcessingContext, scheduled_by: dict | None, workflow_id: str,
                               reason: str) -> None:
    if scheduled_by is not None:
        ctx.out.command(ValueType.SCHEDULE, ScheduleIntent.WORKFLOW_START_FAILED, -1, {
            "schedule_id": scheduled_by["schedule_id"], "workflow_id": workflow_id, "reason": reason})


def tell_schedule_closed(ctx: ProcessingContext, run: WorkflowRun, event_type: EventType,
                         attributes: dict[str, Any]) -> None:
    """`run` wrote its close event: if it ends the chain, its schedule hears how."""
    if run.scheduled_by is None or event_type not in CLOSE_STATUS or attributes.get("new_execution_run_id"):
        return
    closed = {"status": CLOSE_STATUS[event_type], "result": attributes.get("result"),
              "failure": attributes.get("failure")}
    ctx.out.command(ValueType.SCHEDULE, ScheduleIntent.WORKFLOW_CLOSED, -1, {
        "schedule_id": run.scheduled_by["schedule_id"], "workflow_id": run.workflow_id, "run_id": run.run_id,
        "attributes": orjson.dumps(closed).decode()})
