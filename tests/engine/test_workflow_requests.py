"""Client requests: REQUEST_CANCEL, TERMINATE, DESCRIBE, GET_HISTORY."""

from __future__ import annotations

import orjson

from streamproc.engine.processing import Limits
from tests.engine.workflow_driver import S, WorkflowDriver, attrs, rejections

ACTIVITY = {"type": "SCHEDULE_ACTIVITY_TASK", "activity_id": "1", "activity_type": "reserve",
            "task_queue": "", "input": "[]", "start_to_close_timeout_ms": 10 * S}
TIMER = {"type": "START_TIMER", "timer_id": "2", "start_to_fire_timeout_ms": 3600 * S}


def test_cancel_request_gives_the_workflow_a_task_and_it_cancels_itself(d):
    key, run_id = d.start()
    d.complete(key, [TIMER])
    _, (reply,) = d.send("REQUEST_CANCEL", workflow_id="w1", reason="user asked", identity="cli")
    assert reply.intent == "WORKFLOW_EXECUTION_CANCEL_REQUESTED" and reply.value["run_id"] == run_id
    assert d.types(key)[-2:] == ["WORKFLOW_EXECUTION_CANCEL_REQUESTED", "WORKFLOW_TASK_SCHEDULED"]
    _, (again,) = d.send("REQUEST_CANCEL", workflow_id="w1")
    assert again.rejection_type == "INVALID_STATE"
    d.complete(key, [{"type": "CANCEL_WORKFLOW_EXECUTION", "details": '"bye"'}])
    events = d.check(key)
    assert attrs(events, "WORKFLOW_EXECUTION_CANCEL_REQUESTED") == [{"cause": "user asked", "identity": "cli"}]
    assert events[-1]["event_type"] == "WORKFLOW_EXECUTION_CANCELED"
    assert d.run(key)["status"] == "CANCELED" and d.run(key)["timers"] == {}


def test_terminate_closes_the_run_and_drops_activities_and_timers_silently(d):
    key, _ = d.start()
    d.complete(key, [ACTIVITY, TIMER])
    act_key = d.activity_tasks()[0].key
    _, (reply,) = d.send("TERMINATE", workflow_id="w1", reason="stuck", identity="ops")
    assert reply.intent == "WORKFLOW_EXECUTION_TERMINATED"
    events = d.check(key)
    assert events[-1]["event_type"] == "WORKFLOW_EXECUTION_TERMINATED"
    assert events[-1]["attributes"] == {"reason": "stuck", "details": None, "identity": "ops"}
    assert d.activity(act_key) is None
    assert d.run_until(d.clock.now_ms() + 7200 * S) == []  # nothing left to fire
    (closed,) = rejections(d.send("TERMINATE", workflow_id="w1")[0])
    assert "already completed" in closed.rejection_reason


def test_describe_reports_status_and_what_is_pending(d):
    key, run_id = d.start()
    d.complete(key, [ACTIVITY, TIMER])
    _, (reply,) = d.send("DESCRIBE", workflow_id="w1", run_id=run_id)
    assert reply.intent == "DESCRIBED"
    info = orjson.loads(reply.value["attributes"])
    assert (info["status"], info["run_id"], info["workflow_type"], info["task_queue"]) == (
        "RUNNING", run_id, "Order", "orders")
    assert info["history_length"] == 6 and info["close_time_ms"] == 0
    assert info["pending_activities"] == [{"activity_id": "1", "activity_type": "reserve", "scheduled_event_id": 5,
                                           "cancel_requested": False, "attempt": 1, "state": "SCHEDULED",
                                           "last_started_ms": None, "last_heartbeat_ms": None,
                                           "last_failure": None}]
    assert [t["timer_id"] for t in info["pending_timers"]] == ["2"]
    (missing,) = d.send("DESCRIBE", workflow_id="nope")[1]
    assert missing.rejection_type == "NOT_FOUND"


def test_get_history_answers_in_pages(tmp_path):
    d = WorkflowDriver(tmp_path / "h", limits=Limits(max_history_page_bytes=300))
    try:
        key, run_id = d.start()
        d.complete(key, [{"type": "COMPLETE_WORKFLOW_EXECUTION", "result": '"done"'}])
        _, replies = d.send("GET_HISTORY", workflow_id="w1")
        assert len(replies) > 1 and all(r.intent == "HISTORY_PAGE" for r in replies)
        assert [(r.value["page"], r.value["pages"]) for r in replies] == [(i, len(replies)) for i in range(len(replies))]
        assert [e for r in replies for e in orjson.loads(r.value["history"])] == d.check(key)
    finally:
        d.close()


def test_describe_shows_a_pending_activity_s_last_attempt_and_failure(d):
    from streamproc.protocol.records import Record

    key, run_id = d.start()
    d.complete(key, [ACTIVITY])
    act_key = d.activity_tasks()[0].key
    d.h.send(Record.command("ACTIVITY_TASK", "START", {"attempt": 1, "identity": "w"}, key=act_key))
    failure = {"message": "card network busy", "kind": "APPLICATION", "type": "Transient", "non_retryable": False,
               "next_retry_delay_ms": -1}
    d.h.send(Record.command("ACTIVITY_TASK", "FAIL", {"attempt": 1, "failure": failure}, key=act_key))
    _, (reply,) = d.send("DESCRIBE", workflow_id="w1", run_id=run_id)
    (pending,) = orjson.loads(reply.value["attributes"])["pending_activities"]
    assert pending["attempt"] == 2 and pending["state"] == "SCHEDULED"
    assert pending["last_failure"] == {"message": "card network busy", "type": "Transient"}
    assert pending["last_started_ms"] is None  # the retry has not started
