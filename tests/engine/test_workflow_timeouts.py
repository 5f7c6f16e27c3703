"""Workflow task, run and execution timeouts, and workflow retries (SEMANTICS.md 1.7, 3)."""

from __future__ import annotations

import orjson

from tests.engine.workflow_driver import S, WorkflowDriver, attrs, rejections

T0 = 1_000_000
FAIL = {"type": "FAIL_WORKFLOW_EXECUTION", "failure": {"message": "bad order", "kind": "APPLICATION",
                                                       "type": "OrderError"}}


DRIVER_OPTIONS = {"start_ms": T0}


def test_a_task_not_answered_in_time_times_out_and_is_scheduled_again(d):
    key, _ = d.start()
    assert not d.run_until(T0 + 10 * S - 1)
    produced = d.run_until(T0 + 10 * S)
    events = d.check(key, closed=False)
    assert [e["event_type"] for e in events][-2:] == ["WORKFLOW_TASK_STARTED", "WORKFLOW_TASK_TIMED_OUT"]
    assert attrs(events, "WORKFLOW_TASK_TIMED_OUT") == [
        {"scheduled_event_id": 2, "started_event_id": 3, "timeout_type": "START_TO_CLOSE"}]
    # attempt 2 is transient: the worker is shown its Scheduled event, history is not
    retry = d.shown(key)[-1]
    assert retry["event_type"] == "WORKFLOW_TASK_SCHEDULED" and retry["event_id"] == 5
    assert retry["attributes"]["attempt"] == 2 and retry["event_time_ms"] == T0 + 10 * S
    assert not rejections(produced)
    # the late answer of the first task is stale
    (rejection,) = rejections(d.complete(key, [], scheduled_event_id=2))
    assert "that task is over" in rejection.rejection_reason


def test_task_timeouts_lengthen_from_attempt_four(d):
    key, _ = d.start()
    d.run_until(T0 + 41 * S)  # attempts 1-3 time out after 10 s each
    timeouts = [orjson.loads(t.value["history"])[-1]["attributes"]["start_to_close_timeout_ms"]
                for t in d.workflow_tasks()]
    assert timeouts[:3] == [10 * S] * 3
    assert 10 * S + 4 * S <= timeouts[3] <= 10 * S + 5 * S  # + jittered 5 s (SEMANTICS 3.4)


def test_run_timeout_without_retry_policy_times_the_run_out(d):
    key, _ = d.start(workflow_run_timeout_ms=30 * S, workflow_task_timeout_ms=60 * S)
    d.run_until(T0 + 31 * S)
    events = d.check(key)
    assert events[-1]["event_type"] == "WORKFLOW_EXECUTION_TIMED_OUT"
    assert events[-1]["attributes"] == {"retry_state": "RETRY_POLICY_NOT_SET", "new_execution_run_id": ""}
    assert d.run(key)["status"] == "TIMED_OUT" and d.run(key)["deadlines"] == {}


def test_run_timeout_with_a_retry_policy_starts_a_retry_run_after_the_backoff(d):
    key, run_id = d.start(workflow_run_timeout_ms=30 * S, retry_policy={"initial_interval_ms": 5 * S,
                                                                          "maximum_attempts": 3})
    d.run_until(T0 + 31 * S)
    closed = d.check(key)[-1]["attributes"]
    assert closed["retry_state"] == "IN_PROGRESS" and closed["new_execution_run_id"]
    retry_key = d.current_key("w1")
    retry = d.check(retry_key, closed=False)
    assert [e["event_type"] for e in retry] == ["WORKFLOW_EXECUTION_STARTED"]  # waiting out the backoff
    started = retry[0]["attributes"]
    assert (started["attempt"], started["initiator"], started["first_workflow_task_backoff_ms"]) == (2, "RETRY", 5 * S)
    assert started["continued_failure"]["message"] == "workflow timeout"
    assert started["first_execution_run_id"] == run_id
    d.run_until(T0 + 30 * S + 1 + 5 * S + 1)
    assert d.types(retry_key)[-1] == "WORKFLOW_TASK_SCHEDULED"
    assert d.workflow_tasks()[-1].value["run_id"] == closed["new_execution_run_id"]


def test_failed_run_is_retried_until_maximum_attempts(d):
    key, _ = d.start(retry_policy={"initial_interval_ms": 2 * S, "maximum_attempts": 2})
    d.complete(key, [FAIL])
    first = d.check(key)[-1]["attributes"]
    assert first["retry_state"] == "IN_PROGRESS" and first["failure"]["type"] == "OrderError"
    retry_key = d.current_key("w1")
    d.run_until(d.clock.now_ms() + 3 * S)
    d.complete(retry_key, [FAIL])
    last = d.check(retry_key)[-1]["attributes"]
    assert (last["retry_state"], last["new_execution_run_id"]) == ("MAXIMUM_ATTEMPTS_REACHED", "")
    assert d.run(retry_key)["attempt"] == 2 and d.run(retry_key)["status"] == "FAILED"


def test_fail_without_retry_policy_ends_the_chain(d):
    key, _ = d.start()
    d.complete(key, [FAIL])
    assert d.check(key)[-1]["attributes"]["retry_state"] == "RETRY_POLICY_NOT_SET"
    assert d.current_key("w1") == key


def test_retry_runs_never_pass_the_execution_timeout(d):
    key, _ = d.start(workflow_execution_timeout_ms=60 * S, workflow_run_timeout_ms=20 * S,
                     retry_policy={"initial_interval_ms": S})
    d.run_until(T0 + 61 * S)
    runs = []
    k = key
    while k is not None:
        runs.append(d.run(k))
        d.check(k)
        nxt = [t.key for t in d.workflow_tasks() if t.value["run_id"] == runs[-1]["new_execution_run_id"]]
        k = nxt[0] if nxt else None
    assert [r["status"] for r in runs][-1] == "TIMED_OUT"
    last_close = d.history(d.current_key("w1"))[-1]
    assert last_close["event_type"] == "WORKFLOW_EXECUTION_TIMED_OUT"
    assert last_close["attributes"]["retry_state"] == "TIMEOUT"
    assert last_close["event_time_ms"] <= T0 + 60 * S + 1


def test_a_stale_deadline_command_is_rejected(d):
    key, _ = d.start(workflow_run_timeout_ms=30 * S)
    d.complete(key, [{"type": "COMPLETE_WORKFLOW_EXECUTION", "result": "1"}])
    d.clock.advance(31 * S)
    events, _ = d.send("RUN_TIME_OUT", key, due_ms=T0 + 30 * S)
    (rejection,) = rejections(events)
    assert rejection.rejection_type == "INVALID_STATE" and "the run is closed" in rejection.rejection_reason
    events, _ = d.send("TIMER_FIRE", key, timer_id="1", due_ms=T0)
    assert rejections(events)


def test_a_timer_fired_twice_by_the_checker_is_appended_once(d):
    key, _ = d.start()
    d.complete(key, [{"type": "START_TIMER", "timer_id": "1", "start_to_fire_timeout_ms": S}])
    due = d.run(key)["timers"]["1"]["due_ms"]
    d.clock.advance(2 * S)
    first, _ = d.send("TIMER_FIRE", key, timer_id="1", due_ms=due)
    again, _ = d.send("TIMER_FIRE", key, timer_id="1", due_ms=due)
    assert [r.intent for r in first] == ["TIMER_FIRED", "WORKFLOW_TASK_SCHEDULED"]
    (rejection,) = rejections(again)
    assert rejection.rejection_type == "INVALID_STATE"
    assert len(attrs(d.check(key, closed=False), "TIMER_FIRED")) == 1


def test_runs_timers_and_deadlines_survive_a_restart_from_the_database(tmp_path):
    d = WorkflowDriver(tmp_path / "db", start_ms=T0)
    key, _ = d.start(workflow_run_timeout_ms=600 * S)
    d.complete(key, [{"type": "START_TIMER", "timer_id": "1", "start_to_fire_timeout_ms": 60 * S}])
    d.close()
    d = WorkflowDriver(tmp_path / "db", start_ms=T0 + 61 * S)
    try:
        fired = [e.intent for e in d.run_until(T0 + 62 * S)]
        assert fired == ["TIMER_FIRED", "WORKFLOW_TASK_SCHEDULED"]
        d.run_until(T0 + 601 * S)
        assert d.check(key)[-1]["event_type"] == "WORKFLOW_EXECUTION_TIMED_OUT"
    finally:
        d.close()
