"""Answers of an activity completed asynchronously: by task token (key and attempt) or by
workflow id and activity id (resolved to the current attempt), acknowledged when asked."""

from __future__ import annotations

import orjson

from streamproc.protocol.records import Record, RecordType
from tests.engine.workflow_driver import S, rejections

ACTIVITY = {"type": "SCHEDULE_ACTIVITY_TASK", "activity_id": "charge-1", "activity_type": "charge",
            "task_queue": "", "input": '["order-1"]', "start_to_close_timeout_ms": 60 * S}
FAILURE = {"message": "card declined", "kind": "APPLICATION", "type": "Declined"}


def send(d, intent, key=-1, **value):
    """An activity command from a client that listens on reply partition 0: (events, replies)."""
    before = len(d.h.replies)
    events = d.h.send(Record.command("ACTIVITY_TASK", intent, value, key=key, request_id="r",
                                     reply_partition=0))
    return events, [r for _, r in d.h.replies[before:]]


def by_ids(d, intent, workflow_id="w1", activity_id="charge-1", **value):
    return send(d, intent, workflow_id=workflow_id, activity_id=activity_id, reply_when_accepted=True, **value)


def started_activity(d, *commands, **activity):
    """A run whose activity has started (its worker raised complete-async): (run key, activity key)."""
    run_key, _ = d.start()
    d.complete(run_key, [{**ACTIVITY, **activity}, *commands])
    (task,) = d.activity_tasks()
    d.h.send(Record.command("ACTIVITY_TASK", "START", {"attempt": 1, "identity": "w"}, key=task.key))
    return run_key, task.key


def test_complete_by_ids_resolves_the_current_attempt_and_answers_accepted(d):
    run_key, key = started_activity(d)
    events, replies = by_ids(d, "COMPLETE", result='"charged"')
    assert rejections(events) == []
    assert [(r.intent, r.key, r.value["attempt"]) for r in replies] == [("ANSWER_ACCEPTED", key, 1)]
    (completed,) = [e for e in d.history(run_key) if e["event_type"] == "ACTIVITY_TASK_COMPLETED"]
    assert completed["attributes"]["result"] == '"charged"'
    assert d.activity(key) is None


def test_complete_by_task_token_names_key_and_attempt(d):
    run_key, key = started_activity(d)
    _, replies = send(d, "COMPLETE", key, attempt=1, result='"charged"', reply_when_accepted=True)
    assert [r.intent for r in replies] == ["ANSWER_ACCEPTED"]
    assert "ACTIVITY_TASK_COMPLETED" in d.types(run_key)


def test_a_worker_answer_gets_no_acknowledgement(d):
    """Workers need only refusals: an accepted answer costs them no reply record."""
    run_key, key = started_activity(d)
    _, replies = send(d, "COMPLETE", key, attempt=1, result='"charged"')
    assert replies == []


def test_by_ids_with_the_run_id_and_with_another_run_id(d):
    _, _ = started_activity(d)
    run_id = d.run(d.current_key("w1"))["run_id"]
    events, _ = by_ids(d, "HEARTBEAT", run_id="not-a-run", details='"x"')
    (rejection,) = rejections(events)
    assert rejection.rejection_type == "NOT_FOUND" and "workflow execution not found" in rejection.rejection_reason
    _, replies = by_ids(d, "HEARTBEAT", run_id=run_id, details='"x"')
    assert [r.intent for r in replies] == ["HEARTBEAT_RECORDED"]


def test_by_ids_of_an_unknown_activity_or_workflow_is_not_found(d):
    started_activity(d)
    for workflow_id, activity_id, expected in (("w1", "other", "no open activity with ActivityId 'other'"),
                                               ("nope", "charge-1", "workflow execution not found")):
        events, replies = by_ids(d, "COMPLETE", workflow_id=workflow_id, activity_id=activity_id, result="1")
        (rejection,) = rejections(events)
        assert rejection.rejection_type == "NOT_FOUND" and expected in rejection.rejection_reason
        assert [r.record_type for r in replies] == [RecordType.COMMAND_REJECTION]


def test_by_ids_before_the_attempt_started_is_refused(d):
    run_key, _ = d.start()
    d.complete(run_key, [ACTIVITY])
    events, _ = by_ids(d, "COMPLETE", result="1")
    (rejection,) = rejections(events)
    assert rejection.rejection_type == "INVALID_STATE" and "has not started" in rejection.rejection_reason


def test_by_ids_after_the_run_closed_is_not_found(d):
    run_key, _ = started_activity(d)
    d.send("TERMINATE", workflow_id="w1", run_id="", reason="stop", identity="me")
    (rejection,) = rejections(by_ids(d, "COMPLETE", result="1")[0])
    assert rejection.rejection_type == "NOT_FOUND" and "already completed" in rejection.rejection_reason


def test_heartbeat_by_ids_reports_a_cancellation_request(d):
    run_key, key = started_activity(d, {"type": "START_TIMER", "timer_id": "t", "start_to_fire_timeout_ms": S},
                                    heartbeat_timeout_ms=10 * S)
    _, (reply,) = by_ids(d, "HEARTBEAT", details='"step 1"')
    assert reply.intent == "HEARTBEAT_RECORDED" and reply.value["cancel_requested"] is False
    d.run_until(d.clock.now_ms() + 2 * S)  # the timer fires: a workflow task to cancel from
    d.complete(run_key, [{"type": "REQUEST_CANCEL_ACTIVITY_TASK", "scheduled_event_id": 5}])
    _, (reply,) = by_ids(d, "HEARTBEAT", details='"step 2"')
    assert reply.value["cancel_requested"] is True
    _, replies = by_ids(d, "REPORT_CANCELED", details='"stopped"')
    assert [r.intent for r in replies] == ["ANSWER_ACCEPTED"]
    assert d.types(run_key)[-3:] == ["ACTIVITY_TASK_STARTED", "ACTIVITY_TASK_CANCELED", "WORKFLOW_TASK_SCHEDULED"]


def test_fail_is_acknowledged_when_retried_and_keeps_its_last_heartbeat_details(d):
    run_key, key = started_activity(d)
    _, replies = send(d, "FAIL", key, attempt=1, failure=FAILURE, details='["page", 7]', reply_when_accepted=True)
    assert [r.intent for r in replies] == ["ANSWER_ACCEPTED"]
    assert "ACTIVITY_TASK_FAILED" not in d.types(run_key)  # retried: Temporal writes nothing yet
    d.run_until(d.clock.now_ms() + 2 * S)
    retry = d.activity_tasks()[-1]
    assert retry.value["attempt"] == 2 and orjson.loads(retry.value["heartbeat_details"]) == ["page", 7]


def test_fail_with_bad_last_heartbeat_details_is_an_invalid_argument(d):
    _, key = started_activity(d)
    (rejection,) = rejections(send(d, "FAIL", key, attempt=1, failure=FAILURE, details="{not json")[0])
    assert rejection.rejection_type == "INVALID_ARGUMENT" and "last_heartbeat_details" in rejection.rejection_reason


def test_a_token_of_a_timed_out_attempt_is_refused_and_ids_reach_the_retry(d):
    run_key, key = started_activity(d, start_to_close_timeout_ms=5 * S)
    d.run_until(d.clock.now_ms() + 6 * S)  # start-to-close: attempt 2 is dispatched
    (rejection,) = rejections(send(d, "COMPLETE", key, attempt=1, result="1", reply_when_accepted=True)[0])
    assert rejection.rejection_type == "INVALID_STATE" and "attempt is over" in rejection.rejection_reason
    d.h.send(Record.command("ACTIVITY_TASK", "START", {"attempt": 2, "identity": "w"}, key=key))
    _, (reply,) = by_ids(d, "COMPLETE", result='"second"')
    assert reply.intent == "ANSWER_ACCEPTED" and reply.value["attempt"] == 2


def test_a_token_of_an_activity_that_timed_out_for_good_is_not_found(d):
    _, key = started_activity(d, start_to_close_timeout_ms=5 * S, retry_policy={"maximum_attempts": 1})
    d.run_until(d.clock.now_ms() + 6 * S)
    (rejection,) = rejections(send(d, "COMPLETE", key, attempt=1, result="1", reply_when_accepted=True)[0])
    assert rejection.rejection_type == "NOT_FOUND"


def test_a_workflows_activity_task_names_the_workflow_for_answers_by_ids(d):
    run_key, run_id = d.start()
    d.complete(run_key, [ACTIVITY])
    (task,) = d.activity_tasks()
    assert (task.value["workflow_id"], task.value["run_id"], task.value["workflow_type"]) == ("w1", run_id, "Order")


def test_a_clients_activity_answered_by_token_is_acknowledged_after_its_events(d):
    (scheduled,) = d.h.send(Record.command("ACTIVITY_TASK", "SCHEDULE", {
        "activity_id": "a1", "activity_type": "charge", "task_queue": "payments", "input": "[]",
        "start_to_close_timeout_ms": 10 * S}))
    assert scheduled.value["workflow_id"] == ""
    d.h.send(Record.command("ACTIVITY_TASK", "START", {"attempt": 1, "identity": "w"}, key=scheduled.key))
    _, replies = send(d, "COMPLETE", scheduled.key, attempt=1, result='"done"', reply_when_accepted=True)
    assert [r.intent for r in replies] == ["ActivityTaskStarted", "ActivityTaskCompleted", "ANSWER_ACCEPTED"]
