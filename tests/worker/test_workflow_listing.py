"""Folding a namespace's workflow events into one row per run (`streamproc workflow list`)."""

from __future__ import annotations

from streamproc.client.workflow_events import WorkflowEvent
from streamproc.client.workflow_listing import summarize_executions
from streamproc.semantics.workflow_ids import WorkflowExecutionStatus as S


def ev(workflow_id, run_id, event_id, event_type, time_ms, **attributes) -> WorkflowEvent:
    return WorkflowEvent(workflow_id, run_id, event_id, event_type, time_ms, attributes)


def test_each_run_gets_its_type_status_times_and_length_newest_first():
    events = [
        ev("a", "a1", 1, "WORKFLOW_EXECUTION_STARTED", 100, workflow_type="Order", task_queue="q"),
        ev("b", "b1", 1, "WORKFLOW_EXECUTION_STARTED", 200, workflow_type="Refund", task_queue="r"),
        ev("a", "a1", 2, "WORKFLOW_TASK_SCHEDULED", 100),
        ev("a", "a1", 5, "WORKFLOW_EXECUTION_CONTINUED_AS_NEW", 150, new_execution_run_id="a2"),
        ev("a", "a2", 1, "WORKFLOW_EXECUTION_STARTED", 150, workflow_type="Order", task_queue="q"),
        ev("b", "b1", 7, "WORKFLOW_EXECUTION_TERMINATED", 300, reason="x"),
    ]
    rows = [(r.workflow_id, r.run_id, r.workflow_type, r.task_queue, r.status, r.start_time_ms,
             r.close_time_ms, r.history_length) for r in summarize_executions(events)]
    assert rows == [("b", "b1", "Refund", "r", S.TERMINATED, 200, 300, 7),
                    ("a", "a2", "Order", "q", S.RUNNING, 150, 0, 1),
                    ("a", "a1", "Order", "q", S.CONTINUED_AS_NEW, 100, 150, 5)]


def test_a_run_whose_start_is_gone_is_still_listed_from_its_later_events():
    (row,) = summarize_executions([ev("c", "c1", 9, "WORKFLOW_EXECUTION_COMPLETED", 50, result="1")])
    assert (row.workflow_id, row.status, row.workflow_type, row.history_length) == ("c", S.COMPLETED, "", 9)
    assert row.as_dict()["status"] == "COMPLETED"
