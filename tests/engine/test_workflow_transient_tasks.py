"""Transient workflow task attempts (SEMANTICS.md 3.4, 6.2): after a task fails or times
out, attempts >= 2 are shown to the worker but written to history only when one completes."""

from __future__ import annotations

import orjson

from streamproc.protocol.records import Record
from tests.engine.workflow_driver import S, attrs, rejections

T0 = 1_000_000
COMPLETE = {"type": "COMPLETE_WORKFLOW_EXECUTION", "result": '"ok"'}
ACTIVITY = {"type": "SCHEDULE_ACTIVITY_TASK", "activity_id": "1", "activity_type": "reserve",
            "task_queue": "", "input": '["sku"]', "start_to_close_timeout_ms": 600 * S}


DRIVER_OPTIONS = {"start_ms": T0}


def test_a_run_whose_tasks_keep_failing_does_not_grow_its_history(d):
    key, _ = d.start()
    d.fail_task(key)  # attempt 1 is a normal task: Started + Failed are written
    after_first = d.history(key)
    for _ in range(3):  # attempts 2-4 fail ...
        d.clock.advance(S)
        assert d.fail_task(key) == []  # ... without a single event
    d.run_until(d.clock.now_ms() + 60 * S)  # attempt 5 and more time out
    assert d.history(key) == after_first
    assert [e["event_type"] for e in after_first] == [
        "WORKFLOW_EXECUTION_STARTED", "WORKFLOW_TASK_SCHEDULED", "WORKFLOW_TASK_STARTED", "WORKFLOW_TASK_FAILED"]
    attempts = [orjson.loads(t.value["history"])[-1]["attributes"]["attempt"] for t in d.workflow_tasks()]
    assert attempts[:5] == [1, 2, 3, 4, 5] and attempts == sorted(attempts)
    assert d.run(key)["next_event_id"] == 5


def test_a_completed_transient_attempt_writes_scheduled_started_completed_together(d):
    key, _ = d.start()
    d.run_until(T0 + 10 * S + 1)  # attempt 1 times out
    d.clock.advance(3 * S)
    d.fail_task(key)  # attempt 2 fails: nothing written
    shown = d.shown(key)
    scheduled = shown[-1]
    assert (scheduled["event_id"], scheduled["attributes"]["attempt"]) == (5, 3)
    assert scheduled["event_time_ms"] == T0 + 13 * S + 1
    assert shown[:-1] == d.history(key)  # the worker sees history, then the transient event
    d.clock.advance(2 * S)
    written = d.complete(key, [COMPLETE], attempt=3)
    assert [r.intent for r in written] == ["WORKFLOW_TASK_SCHEDULED", "WORKFLOW_TASK_STARTED",
                                           "WORKFLOW_TASK_COMPLETED", "WORKFLOW_EXECUTION_COMPLETED"]
    events = d.check(key)
    # Scheduled is written as the worker saw it (its time is workflow.now() of the code)
    assert events[4] == scheduled
    assert written[0].value["event_time_ms"] == scheduled["event_time_ms"]
    assert events[5]["event_time_ms"] == T0 + 15 * S + 1
    assert attrs(events, "WORKFLOW_TASK_COMPLETED") == [
        {"scheduled_event_id": 5, "started_event_id": 6, "identity": "wf-worker"}]


def test_a_late_answer_of_an_earlier_transient_attempt_is_rejected(d):
    key, _ = d.start()
    d.fail_task(key)
    d.fail_task(key)  # attempts 2 and 3 share scheduled event id 5
    assert (d.task(key)["scheduled_event_id"], d.task(key)["attempt"]) == (5, 3)
    (rejection,) = rejections(d.complete(key, [COMPLETE], attempt=2))
    assert "that task is over (the task out now is 5 attempt 3)" in rejection.rejection_reason
    assert d.types(key)[-1] == "WORKFLOW_TASK_FAILED"
    d.complete(key, [COMPLETE], attempt=3)
    assert d.check(key)[-1]["event_type"] == "WORKFLOW_EXECUTION_COMPLETED"


def test_new_events_make_the_next_attempt_a_normal_task(d):
    key, _ = d.start()
    d.complete(key, [ACTIVITY, {"type": "START_TIMER", "timer_id": "2", "start_to_fire_timeout_ms": S}])
    d.run_until(d.clock.now_ms() + 2 * S)  # the timer fires: task 2 (event 8)
    d.fail_task(key)  # attempt 2 of task 2 is transient
    act_key = d.activity_tasks()[0].key
    d.h.send(Record.command("ACTIVITY_TASK", "START", {"attempt": 1, "identity": "w"}, key=act_key))
    d.h.send(Record.command("ACTIVITY_TASK", "COMPLETE", {"attempt": 1, "result": "1"}, key=act_key))
    assert d.types(key)[-1] == "WORKFLOW_TASK_FAILED"  # buffered while attempt 2 is out
    d.fail_task(key)
    events = d.check(key, closed=False)
    assert [e["event_type"] for e in events][-5:] == [
        "WORKFLOW_TASK_STARTED", "WORKFLOW_TASK_FAILED", "ACTIVITY_TASK_STARTED", "ACTIVITY_TASK_COMPLETED",
        "WORKFLOW_TASK_SCHEDULED"]
    assert events[-1]["attributes"]["attempt"] == 1 and d.task(key)["scheduled_event_id"] == events[-1]["event_id"]


def test_a_run_closed_while_a_transient_attempt_is_out_has_a_well_formed_history(d):
    key, _ = d.start(workflow_run_timeout_ms=30 * S)
    d.fail_task(key)
    d.send("TERMINATE", workflow_id="w1", run_id="", reason="stop", identity="ops")
    events = d.check(key)
    assert [e["event_type"] for e in events][-2:] == ["WORKFLOW_TASK_FAILED", "WORKFLOW_EXECUTION_TERMINATED"]
    assert events[-1]["event_id"] == 5 and d.run(key)["deadlines"] == {}
