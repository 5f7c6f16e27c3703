"""Eager activity execution: a TASK_COMPLETE that asks for it gets its activities started
for the completing worker, as replies, instead of on the task queue."""

from __future__ import annotations

import orjson

from streamproc.protocol.records import Record
from tests.engine.workflow_driver import S, rejections

EAGER = {"type": "SCHEDULE_ACTIVITY_TASK", "activity_id": "1", "activity_type": "reserve", "task_queue": "",
         "input": '["sku"]', "start_to_close_timeout_ms": 10 * S, "request_eager_execution": True}


def complete(d, key, commands, reply_partition=0, scheduled_event_id=None):
    """TASK_COMPLETE for the task out now (or the one named); returns its replies (none
    without a reply partition)."""
    if scheduled_event_id is None:
        scheduled_event_id = d.task(key)["scheduled_event_id"]
    _, replies = d.send("TASK_COMPLETE", key, request_id="req-1", reply_partition=reply_partition,
                        scheduled_event_id=scheduled_event_id, attempt=0, identity="wf-worker-7",
                        commands=orjson.dumps(commands).decode())
    return replies


def activity(d, intent, key, **value):
    return d.h.send(Record.command("ACTIVITY_TASK", intent, value, key=key))


def test_an_eager_activity_is_started_for_the_worker_and_sent_to_it_not_to_the_queue(d):
    key, _ = d.start()
    now = d.clock.now_ms()
    task, processed = complete(d, key, [EAGER])
    assert (task.value_type, task.intent, task.request_id) == ("ACTIVITY_TASK", "ACTIVITY_TASK", "req-1")
    assert task.value["attempt"] == 1 and task.value["started_time_ms"] == now
    assert task.value["identity"] == "wf-worker-7" and task.value["input"] == '["sku"]'
    assert (processed.value_type, processed.intent, processed.request_id) == ("WORKFLOW", "TASK_PROCESSED", "req-1")
    assert d.activity_tasks() == []
    # started already: a START (a task-queue delivery that cannot exist) is refused
    assert rejections(activity(d, "START", task.key, attempt=1, identity="other"))
    activity(d, "COMPLETE", task.key, attempt=1, result='"reserved"')
    events = d.check(key, closed=False)
    assert [e["event_type"] for e in events][4:] == [
        "ACTIVITY_TASK_SCHEDULED", "ACTIVITY_TASK_STARTED", "ACTIVITY_TASK_COMPLETED", "WORKFLOW_TASK_SCHEDULED"]
    assert "request_eager_execution" not in events[4]["attributes"]  # not one of Temporal's attributes
    assert events[5]["attributes"]["identity"] == "wf-worker-7"


def test_an_eager_attempt_whose_worker_is_gone_times_out_and_is_retried_through_the_queue(d):
    key, _ = d.start()
    (task, _) = complete(d, key, [EAGER])
    d.run_until(d.clock.now_ms() + 10 * S + 1)
    assert d.activity_tasks() == [] and d.activity(task.key)[1].attempt == 2  # in its retry backoff (1 s)
    d.run_until(d.clock.now_ms() + S + 1)
    (retry,) = d.activity_tasks()
    assert retry.key == task.key and retry.value["attempt"] == 2
    assert retry.value["started_time_ms"] == 0  # not started: a worker of the queue STARTs it


def test_no_eager_start_for_another_queue_without_a_listener_or_without_the_request(d):
    key, _ = d.start()
    other_queue = {**EAGER, "activity_id": "2", "task_queue": "billing"}
    not_asked = {**EAGER, "activity_id": "3", "request_eager_execution": False}
    replies = complete(d, key, [other_queue, not_asked])
    assert [r.intent for r in replies] == ["TASK_PROCESSED"]
    assert sorted(t.value["activity_id"] for t in d.activity_tasks()) == ["2", "3"]

    key2, _ = d.start("w2")
    assert complete(d, key2, [{**EAGER, "activity_id": "4"}], reply_partition=-1) == []
    assert "4" in [t.value["activity_id"] for t in d.activity_tasks()]


def test_a_task_that_fails_on_a_bad_command_still_answers_so_the_worker_frees_its_slots(d):
    key, _ = d.start()
    bad = {**EAGER, "activity_id": "2", "start_to_close_timeout_ms": "soon"}
    replies = complete(d, key, [EAGER, bad])
    assert [r.intent for r in replies] == ["TASK_PROCESSED"]
    assert d.types(key)[-1] == "WORKFLOW_TASK_FAILED"
    assert d.activity_tasks() == [] and d.run(key)["activities"] == {}


def test_a_stale_answer_is_rejected_to_the_worker_and_starts_nothing(d):
    key, _ = d.start()
    complete(d, key, [])
    (rejection,) = complete(d, key, [EAGER], scheduled_event_id=2)
    assert rejection.rejection_type == "INVALID_STATE" and rejection.request_id == "req-1"
    assert d.activity_tasks() == [] and d.run(key)["activities"] == {}
