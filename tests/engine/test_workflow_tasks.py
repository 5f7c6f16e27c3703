"""Workflow task answers: commands (activities, timers, markers, close), failures, stale answers."""

from __future__ import annotations

import orjson
import pytest

from streamproc.protocol.records import Record
from tests.engine.workflow_driver import S, attrs, rejections

ACTIVITY = {"type": "SCHEDULE_ACTIVITY_TASK", "activity_id": "1", "activity_type": "reserve",
            "task_queue": "", "input": '["sku"]', "start_to_close_timeout_ms": 10 * S}
COMPLETE = {"type": "COMPLETE_WORKFLOW_EXECUTION", "result": '"ok"'}
TIMER = {"type": "START_TIMER", "timer_id": "t", "start_to_fire_timeout_ms": S}


def activity(d, intent, key, **value):
    return d.h.send(Record.command("ACTIVITY_TASK", intent, value, key=key))


def test_one_activity_then_complete_is_temporals_eleven_events(d):
    key, run_id = d.start()
    d.complete(key, [ACTIVITY])
    (task,) = d.activity_tasks()
    assert task.value["task_queue"] == "orders" and task.value["scheduled_event_id"] == 5
    activity(d, "START", task.key, attempt=1, identity="act-worker")
    activity(d, "COMPLETE", task.key, attempt=1, result='"reserved"')
    d.complete(key, [COMPLETE])
    events = d.check(key)
    assert [e["event_type"] for e in events] == [
        "WORKFLOW_EXECUTION_STARTED", "WORKFLOW_TASK_SCHEDULED", "WORKFLOW_TASK_STARTED",
        "WORKFLOW_TASK_COMPLETED", "ACTIVITY_TASK_SCHEDULED", "ACTIVITY_TASK_STARTED",
        "ACTIVITY_TASK_COMPLETED", "WORKFLOW_TASK_SCHEDULED", "WORKFLOW_TASK_STARTED",
        "WORKFLOW_TASK_COMPLETED", "WORKFLOW_EXECUTION_COMPLETED"]
    scheduled = events[4]["attributes"]
    assert scheduled["task_queue"] == "orders" and scheduled["workflow_task_completed_event_id"] == 4
    assert scheduled["retry_policy"]["initial_interval_ms"] == 1000  # filled like Temporal
    assert events[5]["attributes"] == {"scheduled_event_id": 5, "identity": "act-worker", "attempt": 1,
                                       "last_failure": None}
    assert events[6]["attributes"] == {"scheduled_event_id": 5, "started_event_id": 6,
                                       "result": '"reserved"', "identity": "act-worker"}
    assert events[10]["attributes"] == {"result": '"ok"', "workflow_task_completed_event_id": 10,
                                        "new_execution_run_id": ""}
    assert d.run(key)["status"] == "COMPLETED"
    close = [r for r in d.h.events if r.intent == "WORKFLOW_EXECUTION_COMPLETED"]
    assert close[0].value["run_id"] == run_id and orjson.loads(close[0].value["attributes"])["result"] == '"ok"'
    # the closed run's activity is gone; a late answer for it is rejected
    assert rejections(activity(d, "COMPLETE", task.key, attempt=1, result="1"))


def test_activity_task_started_is_recorded_at_the_close_with_the_start_time(d):
    """Temporal's dev server, asked (an activity of 2 s): ActivityTaskStarted is appended with
    the close but its event time is the start, 2 s before ActivityTaskCompleted's."""
    key, _ = d.start()
    d.complete(key, [ACTIVITY])
    (task,) = d.activity_tasks()
    d.clock.advance(S)
    activity(d, "START", task.key, attempt=1, identity="act-worker")
    started_ms = d.clock.now_ms()
    d.clock.advance(2 * S)
    activity(d, "COMPLETE", task.key, attempt=1, result='"reserved"')
    events = d.check(key, closed=False)
    assert [(e["event_type"], e["event_time_ms"]) for e in events[5:7]] == [
        ("ACTIVITY_TASK_STARTED", started_ms), ("ACTIVITY_TASK_COMPLETED", started_ms + 2 * S)]
    d.complete(key, [COMPLETE])
    assert d.check(key)[5]["event_time_ms"] == started_ms


def test_activity_retries_leave_one_started_event_and_the_failure(d):
    key, _ = d.start()
    d.complete(key, [{**ACTIVITY, "retry_policy": {"maximum_attempts": 2, "initial_interval_ms": S}}])
    act_key = d.activity_tasks()[0].key
    failure = {"message": "boom", "kind": "APPLICATION", "type": "Boom"}
    for attempt in (1, 2):
        activity(d, "START", act_key, attempt=attempt, identity="w")
        activity(d, "FAIL", act_key, attempt=attempt, failure=failure)
        d.run_until(d.clock.now_ms() + 2 * S)
    events = d.check(key, closed=False)
    assert [e["event_type"] for e in events][-4:] == [
        "ACTIVITY_TASK_SCHEDULED", "ACTIVITY_TASK_STARTED", "ACTIVITY_TASK_FAILED", "WORKFLOW_TASK_SCHEDULED"]
    assert events[-3]["attributes"]["attempt"] == 2
    assert events[-2]["attributes"]["retry_state"] == "MAXIMUM_ATTEMPTS_REACHED"
    assert events[-2]["attributes"]["failure"]["message"] == "boom"


def test_activity_timeout_is_appended_with_timeout_failure(d):
    key, _ = d.start()
    d.complete(key, [{**ACTIVITY, "schedule_to_close_timeout_ms": 5 * S, "start_to_close_timeout_ms": 0}])
    d.run_until(d.clock.now_ms() + 6 * S)
    events = d.check(key, closed=False)
    (timed_out,) = attrs(events, "ACTIVITY_TASK_TIMED_OUT")
    assert timed_out["retry_state"] == "TIMEOUT" and timed_out["failure"]["timeout_type"] == "SCHEDULE_TO_START"
    assert events[-1]["event_type"] == "WORKFLOW_TASK_SCHEDULED"


def test_events_arriving_while_a_task_is_out_are_buffered_until_it_ends(d):
    key, _ = d.start()
    d.complete(key, [ACTIVITY, {"type": "START_TIMER", "timer_id": "2", "start_to_fire_timeout_ms": S}])
    act_key = d.activity_tasks()[0].key
    d.run_until(d.clock.now_ms() + 2 * S)  # timer fires: new task 2 goes out
    task = d.task(key)
    activity(d, "START", act_key, attempt=1, identity="w")
    activity(d, "COMPLETE", act_key, attempt=1, result="1")  # while task 2 is out: buffered
    assert d.types(key)[-1] == "WORKFLOW_TASK_SCHEDULED"
    d.complete(key, [{"type": "RECORD_MARKER", "marker_name": "m", "details": {"v": 1}}])
    events = d.check(key, closed=False)
    assert [e["event_type"] for e in events][-7:] == [
        "WORKFLOW_TASK_SCHEDULED", "WORKFLOW_TASK_STARTED", "WORKFLOW_TASK_COMPLETED", "MARKER_RECORDED",
        "ACTIVITY_TASK_STARTED", "ACTIVITY_TASK_COMPLETED", "WORKFLOW_TASK_SCHEDULED"]
    assert events[-7]["event_id"] == task["scheduled_event_id"]
    assert events[-2]["attributes"]["started_event_id"] == events[-3]["event_id"]
    # the new task shows the worker everything after the task it answered, buffered events too
    shown = d.workflow_tasks()[-1].value
    assert shown["first_event_id"] == task["scheduled_event_id"]
    assert orjson.loads(shown["history"]) == events[task["scheduled_event_id"] - 1:]


def test_close_command_while_events_are_buffered_fails_the_task(d):
    key, _ = d.start()
    d.complete(key, [{"type": "START_TIMER", "timer_id": "1", "start_to_fire_timeout_ms": S},
                     {"type": "START_TIMER", "timer_id": "2", "start_to_fire_timeout_ms": 3 * S}])
    d.run_until(d.clock.now_ms() + 2 * S)
    d.run_until(d.clock.now_ms() + 2 * S)  # timer 2 fires while task 2 is out
    d.complete(key, [COMPLETE])
    events = d.check(key, closed=False)
    (failed,) = attrs(events, "WORKFLOW_TASK_FAILED")
    assert failed["cause"] == "UNHANDLED_COMMAND"
    assert [e["event_type"] for e in events][-3:] == ["WORKFLOW_TASK_FAILED", "TIMER_FIRED", "WORKFLOW_TASK_SCHEDULED"]
    assert events[-1]["attributes"]["attempt"] == 1  # new events: a normal task, not a transient retry
    d.complete(key, [COMPLETE])
    assert d.check(key)[-1]["event_type"] == "WORKFLOW_EXECUTION_COMPLETED"


def test_timer_fires_and_can_be_canceled(d):
    key, _ = d.start()
    d.complete(key, [{"type": "START_TIMER", "timer_id": "1", "start_to_fire_timeout_ms": 60 * S},
                     {"type": "START_TIMER", "timer_id": "2", "start_to_fire_timeout_ms": 3600 * S}])
    started_at = d.clock.now_ms()
    # Temporal's rule: a timer fires at its time, not a millisecond after (jobs keep Zeebe's)
    assert not [e for e in d.run_until(started_at + 60 * S - 1) if e.intent == "TIMER_FIRED"]
    fired = [e for e in d.run_until(started_at + 61 * S) if e.intent == "TIMER_FIRED"]
    assert len(fired) == 1 and fired[0].value["event_time_ms"] == started_at + 60 * S
    d.complete(key, [{"type": "CANCEL_TIMER", "timer_id": "2"}])
    d.run_until(started_at + 7200 * S)
    events = d.check(key, closed=False)
    assert attrs(events, "TIMER_FIRED") == [{"timer_id": "1", "started_event_id": 5}]
    assert attrs(events, "TIMER_CANCELED") == [{"timer_id": "2", "started_event_id": 6,
                                                "workflow_task_completed_event_id": 10}]
    assert d.task(key) is None and d.run(key)["timers"] == {}


def test_cancel_of_a_timer_that_fired_while_the_task_was_out_wins(d):
    key, _ = d.start()
    d.complete(key, [{"type": "START_TIMER", "timer_id": "1", "start_to_fire_timeout_ms": S},
                     {"type": "START_TIMER", "timer_id": "2", "start_to_fire_timeout_ms": 3 * S}])
    d.run_until(d.clock.now_ms() + 2 * S)
    d.run_until(d.clock.now_ms() + 2 * S)  # timer 2 fires, buffered
    d.complete(key, [{"type": "CANCEL_TIMER", "timer_id": "2"}])
    events = d.check(key, closed=False)
    assert attrs(events, "TIMER_FIRED") == [{"timer_id": "1", "started_event_id": 5}]
    assert [a["timer_id"] for a in attrs(events, "TIMER_CANCELED")] == ["2"]


@pytest.mark.parametrize("commands, cause, message", [
    ([ACTIVITY, ACTIVITY], "SCHEDULE_ACTIVITY_DUPLICATE_ID", "Activity with ActivityId 1 is already open"),
    ([{**ACTIVITY, "retry_policy": {"maximum_attempts": -1}}], "BAD_SCHEDULE_ACTIVITY_ATTRIBUTES",
     "MaximumAttempts cannot be negative on retry policy."),
    ([COMPLETE, ACTIVITY], "BAD_COMPLETE_WORKFLOW_EXECUTION_ATTRIBUTES", "invalid command sequence"),
    ([{"type": "CANCEL_TIMER", "timer_id": "9"}], "BAD_CANCEL_TIMER_ATTRIBUTES", "no open timer"),
    ([{"type": "REQUEST_CANCEL_ACTIVITY_TASK", "scheduled_event_id": 99}],
     "BAD_REQUEST_CANCEL_ACTIVITY_ATTRIBUTES", "no open activity"),
    ([{"type": "START_TIMER", "timer_id": "1", "start_to_fire_timeout_ms": 0}], "BAD_START_TIMER_ATTRIBUTES",
     "A valid StartToFireTimeout"),
    ([{"type": "CANCEL_WORKFLOW_EXECUTION"}], "BAD_CANCEL_WORKFLOW_EXECUTION_ATTRIBUTES", "the workflow may"),
    ([{"type": "LAUNCH_ROCKET"}], "UNHANDLED_COMMAND", "unknown command type"),
    # a long value is quoted as an excerpt
    ([{"type": "R" * 5000}], "UNHANDLED_COMMAND", "unknown command type '" + "R" * 40 + "...'"),
])
def test_bad_commands_fail_the_task_and_apply_nothing(d, commands, cause, message):
    key, _ = d.start()
    d.complete(key, commands)
    events = d.check(key, closed=False)
    assert [e["event_type"] for e in events] == [
        "WORKFLOW_EXECUTION_STARTED", "WORKFLOW_TASK_SCHEDULED", "WORKFLOW_TASK_STARTED",
        "WORKFLOW_TASK_FAILED"]  # the retry (attempt 2) is transient: not in history yet
    failed = events[3]["attributes"]
    assert failed["cause"] == cause and failed["failure"]["message"].startswith(message)
    assert d.activity_tasks() == [] and d.run(key)["status"] == "RUNNING"
    assert d.shown(key)[-1]["event_id"] == 5 and d.shown(key)[-1]["attributes"]["attempt"] == 2


def test_task_fail_reschedules_with_the_next_attempt(d):
    key, _ = d.start()
    failure = {"message": "nondeterminism", "kind": "APPLICATION", "type": "NonDeterminismError"}
    d.send("TASK_FAIL", key, scheduled_event_id=2, identity="w", cause="NON_DETERMINISTIC_ERROR", failure=failure)
    events = d.check(key, closed=False)
    assert attrs(events, "WORKFLOW_TASK_FAILED") == [{
        "scheduled_event_id": 2, "started_event_id": 3, "cause": "NON_DETERMINISTIC_ERROR",
        "failure": {**failure, **{k: v for k, v in events[3]["attributes"]["failure"].items() if k not in failure}},
        "identity": "w"}]
    assert d.task(key)["attempt"] == 2 and d.workflow_tasks()[-1].value["attempt"] == 2


def test_stale_answers_are_rejected(d):
    key, _ = d.start()
    events = d.complete(key, [COMPLETE], scheduled_event_id=99)
    (rejection,) = rejections(events)
    assert rejection.rejection_type == "INVALID_STATE" and "that task is over" in rejection.rejection_reason
    d.complete(key, [COMPLETE])
    (rejection,) = rejections(d.complete(key, [COMPLETE], scheduled_event_id=2))
    assert "workflow execution already completed" in rejection.rejection_reason
    assert d.check(key)[-1]["event_type"] == "WORKFLOW_EXECUTION_COMPLETED"


def test_request_cancel_of_an_activity_not_started_cancels_it_at_once(d):
    key, _ = d.start()
    d.complete(key, [ACTIVITY, TIMER])
    d.run_until(d.clock.now_ms() + 2 * S)
    d.complete(key, [{"type": "REQUEST_CANCEL_ACTIVITY_TASK", "scheduled_event_id": 5}])
    events = d.check(key, closed=False)
    assert [e["event_type"] for e in events][-3:] == [
        "ACTIVITY_TASK_CANCEL_REQUESTED", "ACTIVITY_TASK_CANCELED", "WORKFLOW_TASK_SCHEDULED"]
    assert events[-2]["attributes"]["latest_cancel_requested_event_id"] == events[-3]["event_id"]
    assert d.run(key)["activities"] == {}


def test_request_cancel_of_a_started_activity_waits_for_the_worker(d):
    key, _ = d.start()
    d.complete(key, [{**ACTIVITY, "heartbeat_timeout_ms": 5 * S}, TIMER])
    act_key = d.activity_tasks()[0].key
    activity(d, "START", act_key, attempt=1, identity="w")
    d.run_until(d.clock.now_ms() + 2 * S)
    d.complete(key, [{"type": "REQUEST_CANCEL_ACTIVITY_TASK", "scheduled_event_id": 5}])
    assert d.types(key)[-1] == "ACTIVITY_TASK_CANCEL_REQUESTED"
    activity(d, "REPORT_CANCELED", act_key, attempt=1, details='"stopped"')
    events = d.check(key, closed=False)
    assert [e["event_type"] for e in events][-3:] == [
        "ACTIVITY_TASK_STARTED", "ACTIVITY_TASK_CANCELED", "WORKFLOW_TASK_SCHEDULED"]
    assert events[-2]["attributes"]["details"] == '"stopped"'


def test_continue_as_new_starts_a_new_run_with_the_same_id_and_chain_deadline(d):
    key, run_id = d.start(workflow_execution_timeout_ms=3600 * S)
    d.complete(key, [{"type": "CONTINUE_AS_NEW_WORKFLOW_EXECUTION", "input": '["next"]'}])
    events = d.check(key)
    (can,) = attrs(events, "WORKFLOW_EXECUTION_CONTINUED_AS_NEW")
    assert can["initiator"] == "WORKFLOW" and can["workflow_type"] == "Order"
    new_key = d.run(key)["new_execution_run_id"] and d.workflow_tasks()[-1].key
    new = d.check(new_key, closed=False)[0]["attributes"]
    assert new["continued_execution_run_id"] == run_id and new["first_execution_run_id"] == run_id
    assert new["input"] == '["next"]' and new["workflow_execution_expiration_time_ms"] == 1_000_000 + 3600 * S
    assert d.workflow_tasks()[-1].value["run_id"] == can["new_execution_run_id"]
    d.run_until(1_000_000 + 3601 * S)  # the execution timeout spans the chain
    assert d.run(new_key)["status"] == "TIMED_OUT"
    assert attrs(d.check(new_key), "WORKFLOW_EXECUTION_TIMED_OUT") == [
        {"retry_state": "TIMEOUT", "new_execution_run_id": ""}]


def test_a_timer_fire_before_the_timer_is_due_is_rejected_and_at_its_time_accepted(d):
    key, _ = d.start()
    d.complete(key, [{"type": "START_TIMER", "timer_id": "1", "start_to_fire_timeout_ms": 5 * S}])
    due = d.clock.now_ms() + 5 * S
    d.clock.set(due - 1)
    events, _ = d.send("TIMER_FIRE", key, timer_id="1", due_ms=due)
    (early,) = rejections(events)
    assert early.rejection_type == "INVALID_STATE" and f"(now {due - 1})" in early.rejection_reason
    d.clock.set(due)
    events, _ = d.send("TIMER_FIRE", key, timer_id="1", due_ms=due)
    assert [e.intent for e in events if e.intent == "TIMER_FIRED"] == ["TIMER_FIRED"]
