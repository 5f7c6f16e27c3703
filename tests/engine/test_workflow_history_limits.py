"""History limits (SEMANTICS.md 6.3): suggestion to continue-as-new, termination at the limit."""

from __future__ import annotations


from streamproc.engine.processing import Limits
from streamproc.protocol.records import Record
from streamproc.semantics.workflow_history_limits import HistoryLimits
from tests.engine.workflow_driver import S, WorkflowDriver, attrs, rejections

LIMITS = Limits(history=HistoryLimits(count_error=12, count_warn=8, count_suggest_continue_as_new=6))
MARKER = {"type": "RECORD_MARKER", "marker_name": "m", "details": None}


DRIVER_OPTIONS = {"limits": LIMITS}


def test_task_started_suggests_continue_as_new_past_the_threshold(d):
    key, _ = d.start()
    d.complete(key, [MARKER, {"type": "START_TIMER", "timer_id": "1", "start_to_fire_timeout_ms": S}])
    d.run_until(d.clock.now_ms() + 2 * S)
    d.complete(key, [])
    first, second = attrs(d.check(key, closed=False), "WORKFLOW_TASK_STARTED")
    assert (first["suggest_continue_as_new"], first["suggest_continue_as_new_reasons"]) == (False, [])
    assert second["suggest_continue_as_new"] is True
    assert second["suggest_continue_as_new_reasons"] == ["TOO_MANY_HISTORY_EVENTS"]
    assert second["history_size_bytes"] > first["history_size_bytes"] > 0


def test_a_command_that_crosses_the_count_limit_is_dropped_and_the_run_terminated(d):
    key, _ = d.start()
    events = d.complete(key, [MARKER] * 10)  # would make 14 events > 12
    (rejection,) = rejections(events)
    assert rejection.rejection_type == "INVALID_ARGUMENT"
    assert rejection.rejection_reason == "Workflow history count exceeds limit."
    history = d.check(key)
    # The task whose answer was dropped is closed first, as Temporal does before terminating.
    assert [e["event_type"] for e in history] == [
        "WORKFLOW_EXECUTION_STARTED", "WORKFLOW_TASK_SCHEDULED", "WORKFLOW_TASK_STARTED", "WORKFLOW_TASK_FAILED",
        "WORKFLOW_EXECUTION_TERMINATED"]
    assert history[3]["attributes"]["cause"] == "FORCE_CLOSE_COMMAND"
    assert history[-1]["attributes"] == {"reason": "Workflow history count exceeds limit.", "details": None,
                                         "identity": "history-service"}
    assert d.run(key)["status"] == "TERMINATED" and d.run(key)["deadlines"] == {}
    # the dropped command left no trace: no marker on the events topic
    assert [r.intent for r in d.h.events if r.intent == "MARKER_RECORDED"] == []


def test_an_activity_completion_that_crosses_the_size_limit_terminates_the_run(tmp_path):
    limits = Limits(history=HistoryLimits(size_error_bytes=3000))
    d = WorkflowDriver(tmp_path / "size", limits=limits)
    try:
        key, _ = d.start()
        d.complete(key, [{"type": "SCHEDULE_ACTIVITY_TASK", "activity_id": "1", "activity_type": "big",
                          "input": "[]", "start_to_close_timeout_ms": 10 * S}])
        (task,) = d.activity_tasks()
        d.h.send(Record.command("ACTIVITY_TASK", "START", {"attempt": 1, "identity": "w"}, key=task.key))
        events = d.h.send(Record.command("ACTIVITY_TASK", "COMPLETE",
                                         {"attempt": 1, "result": '"' + "x" * 3000 + '"'}, key=task.key))
        (rejection,) = rejections(events)
        assert rejection.rejection_reason == "Workflow history size exceeds limit."
        assert d.check(key)[-1]["event_type"] == "WORKFLOW_EXECUTION_TERMINATED"
        assert d.activity(task.key) is None
    finally:
        d.close()
