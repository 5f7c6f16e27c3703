"""The next workflow task rides with an activity's completion: the worker that ran the
activity (eagerly) and has the run cached asks for the run's next task, and gets it as a
reply instead of through the task queue, when the run's last completed task is the one it
has cached and no task is out. Otherwise the engine refuses and the task goes to the queue.
Histories are what the normal path writes."""

from __future__ import annotations

import orjson

from streamproc.protocol.records import Record
from tests.engine.workflow_driver import S, WorkflowDriver

EAGER = {"type": "SCHEDULE_ACTIVITY_TASK", "activity_id": "1", "activity_type": "reserve", "task_queue": "",
         "input": '["sku"]', "start_to_close_timeout_ms": 10 * S, "request_eager_execution": True}
COMPLETE = {"type": "COMPLETE_WORKFLOW_EXECUTION", "result": '"done"'}


def eager_activity(d, key):
    """The first task answered with one eager activity; returns (activity key, the task's scheduled id)."""
    scheduled = d.task(key)["scheduled_event_id"]
    _, replies = d.send("TASK_COMPLETE", key, request_id="req-task", reply_partition=2, scheduled_event_id=scheduled,
                        attempt=0, identity="worker-7", commands=orjson.dumps([EAGER]).decode())
    return replies[0].key, scheduled


def activity_complete(d, key, after, reply_partition=2):
    """The activity's COMPLETE asking for the next task after `after` (0: not asking); returns its replies."""
    _, replies = d.send_record(Record.command("ACTIVITY_TASK", "COMPLETE", {
        "attempt": 1, "result": '"reserved"', "return_workflow_task_after": after}, key=key,
        request_id="req-done", reply_partition=reply_partition))
    return replies


def queued(d, key):
    return [r for r in d.workflow_tasks() if r.key == key]


def test_the_completion_that_asks_gets_the_next_task_as_its_reply(d):
    key, run_id = d.start()
    activity_key, scheduled = eager_activity(d, key)
    (handed,) = activity_complete(d, key=activity_key, after=scheduled)
    assert (handed.value_type, handed.intent, handed.key) == ("WORKFLOW", "WORKFLOW_TASK", key)
    shown = [e["event_type"] for e in orjson.loads(handed.value["history"])]
    assert handed.value["first_event_id"] == scheduled and shown == [
        "WORKFLOW_TASK_SCHEDULED", "WORKFLOW_TASK_STARTED", "WORKFLOW_TASK_COMPLETED", "ACTIVITY_TASK_SCHEDULED",
        "ACTIVITY_TASK_STARTED", "ACTIVITY_TASK_COMPLETED", "WORKFLOW_TASK_SCHEDULED"]
    assert len(queued(d, key)) == 1 and d.task(key)["handed_back"] is True
    d.complete(key, [COMPLETE])
    d.check(key)


def test_histories_are_those_of_the_normal_path(tmp_path):
    histories = []
    for asks in (False, True):
        d = WorkflowDriver(tmp_path / str(asks))
        key, run_id = d.start()
        activity_key, scheduled = eager_activity(d, key)
        d.clock.advance(5)
        replies = activity_complete(d, activity_key, scheduled if asks else 0)
        assert len(replies) == (1 if asks else 0) and len(queued(d, key)) == (1 if asks else 2)
        d.clock.advance(5)
        d.complete(key, [COMPLETE])
        histories.append(orjson.dumps(d.check(key)).decode().replace(run_id, "<run id>"))
        d.close()
    assert histories[0] == histories[1]


def test_a_worker_whose_cache_is_behind_the_run_gets_the_task_through_the_queue(d):
    key, _ = d.start()
    activity_key, scheduled = eager_activity(d, key)
    assert activity_complete(d, activity_key, after=scheduled - 1) == []
    assert len(queued(d, key)) == 2 and not d.task(key).get("handed_back")


def test_no_hand_back_without_a_replies_partition(d):
    key, _ = d.start()
    activity_key, scheduled = eager_activity(d, key)
    assert activity_complete(d, activity_key, after=scheduled, reply_partition=-1) == []
    assert len(queued(d, key)) == 2


def test_a_task_already_out_keeps_the_completion_buffered_and_nothing_is_handed_back(d):
    key, _ = d.start()
    activity_key, scheduled = eager_activity(d, key)
    d.send("SIGNAL", workflow_id="w1", signal_name="go", input="[]")  # a task is out for the signal
    assert activity_complete(d, activity_key, after=scheduled) == []
    assert len(queued(d, key)) == 2 and d.run(key)["buffered"]
    d.complete(key, [])  # the buffered completion gets a task of its own, through the queue
    assert len(queued(d, key)) == 3
    d.complete(key, [COMPLETE])
    d.check(key)


def test_a_handed_back_task_whose_worker_died_times_out_and_goes_through_the_queue(d):
    key, _ = d.start()
    activity_key, scheduled = eager_activity(d, key)
    activity_complete(d, activity_key, after=scheduled)
    d.run_until(d.clock.now_ms() + 10 * S)
    assert d.types(key)[-2:] == ["WORKFLOW_TASK_STARTED", "WORKFLOW_TASK_TIMED_OUT"]
    retry = queued(d, key)[-1]
    assert (retry.value["attempt"], retry.value["first_event_id"]) == (2, 1)
    d.complete(key, [COMPLETE])
    d.check(key)


def test_a_completion_for_a_run_that_closed_meanwhile_is_refused_and_hands_back_nothing(d):
    key, _ = d.start()
    activity_key, scheduled = eager_activity(d, key)
    d.send("TERMINATE", workflow_id="w1", run_id="", reason="stop", identity="me")
    (rejection,) = activity_complete(d, activity_key, after=scheduled)
    assert rejection.rejection_type == "NOT_FOUND" and len(queued(d, key)) == 1
    assert d.types(key)[-1] == "WORKFLOW_EXECUTION_TERMINATED"
