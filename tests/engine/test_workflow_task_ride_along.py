"""The next workflow task rides with an eager activity's completion (`engine/workflows/ride_along.py`):
accepted only when the run is exactly where the worker's answer assumed, and then the history
is the normal path's, event for event; refused otherwise, and the completion goes on as
without the answer (the task scheduled and handed back)."""

from __future__ import annotations

import orjson

from streamproc.protocol.records import Record
from tests.engine.test_workflow_activity_hand_back import COMPLETE, EAGER, eager_activity, queued
from tests.engine.workflow_driver import S, WorkflowDriver

TIMER = {"type": "START_TIMER", "timer_id": "t1", "start_to_fire_timeout_ms": 1 * S}
NEXT = {**EAGER, "activity_id": "2", "request_eager_execution": False}


def complete_riding(d, key, after, next_event_id, commands, identity="worker-7", **flags):
    """The activity's COMPLETE with the next task's answer; returns its replies."""
    answer = {"next_event_id": next_event_id, "commands": commands, "identity": identity, "attributes": flags}
    _, replies = d.send_record(Record.command("ACTIVITY_TASK", "COMPLETE", {
        "attempt": 1, "result": '"reserved"', "return_workflow_task_after": after,
        "workflow_task_answer": orjson.dumps(answer).decode()}, key=key, request_id="req-done", reply_partition=2))
    return replies


def verdict(replies):
    (rode,) = [r for r in replies if r.intent == "RODE_ALONG"]
    return orjson.loads(rode.value["attributes"])


def test_an_accepted_answer_writes_the_normal_path_s_events_in_one_batch(d):
    key, _ = d.start()
    activity_key, scheduled = eager_activity(d, key)
    next_id = d.run(key)["next_event_id"]
    before = len(d.workflow_tasks())
    replies = complete_riding(d, activity_key, scheduled, next_id, [COMPLETE])
    assert verdict(replies)["accepted"] is True
    assert len(d.workflow_tasks()) == before  # no task record: it was answered where it was scheduled
    events = d.check(key)
    assert [e["event_type"] for e in events][-6:] == [
        "ACTIVITY_TASK_STARTED", "ACTIVITY_TASK_COMPLETED", "WORKFLOW_TASK_SCHEDULED", "WORKFLOW_TASK_STARTED",
        "WORKFLOW_TASK_COMPLETED", "WORKFLOW_EXECUTION_COMPLETED"]
    (rode,) = [r for r in replies if r.intent == "RODE_ALONG"]
    (shown,) = orjson.loads(rode.value["history"])
    assert shown == events[-4] and events[-3]["attributes"]["identity"] == "worker-7"


def test_the_history_is_the_normal_path_s_event_for_event(tmp_path):
    histories = []
    for rides in (False, True):
        d = WorkflowDriver(tmp_path / str(rides))
        key, run_id = d.start()
        activity_key, scheduled = eager_activity(d, key)
        d.clock.advance(5)
        if rides:
            replies = complete_riding(d, activity_key, scheduled, d.run(key)["next_event_id"], [NEXT])
            assert verdict(replies)["accepted"] is True
        else:
            _, replies = d.send_record(Record.command("ACTIVITY_TASK", "COMPLETE", {
                "attempt": 1, "result": '"reserved"', "return_workflow_task_after": scheduled}, key=activity_key,
                request_id="req-done", reply_partition=2))
            d.complete(key, [NEXT], identity="worker-7")
        histories.append(orjson.dumps(d.check(key, closed=False)).decode().replace(run_id, "<run id>"))
        d.close()
    assert histories[0] == histories[1]


def test_refused_when_a_signal_came_first_and_the_task_goes_back_to_the_worker(d):
    key, _ = d.start()
    activity_key, scheduled = eager_activity(d, key)
    next_id = d.run(key)["next_event_id"]
    d.send("SIGNAL", workflow_id="w1", signal_name="go", input="[]")  # a task is out for it
    replies = complete_riding(d, activity_key, scheduled, next_id, [COMPLETE])
    assert verdict(replies) == {"accepted": False, "reason": verdict(replies)["reason"]}
    assert "is out" in verdict(replies)["reason"] and d.run(key)["buffered"]
    d.complete(key, [])
    d.complete(key, [COMPLETE])
    d.check(key)


def test_refused_when_the_run_moved_on_after_a_timer_fired(d):
    key, _ = d.start()
    scheduled = d.task(key)["scheduled_event_id"]
    _, replies = d.send("TASK_COMPLETE", key, request_id="req-task", reply_partition=2, scheduled_event_id=scheduled,
                        attempt=0, identity="worker-7", commands=orjson.dumps([EAGER, TIMER]).decode())
    activity_key = next(r.key for r in replies if r.value_type == "ACTIVITY_TASK")
    next_id = d.run(key)["next_event_id"]
    d.run_until(d.clock.now_ms() + 1 * S)  # the timer fires: a task for it
    d.complete(key, [])  # answered by whoever: the run's last completed task moved on
    replies = complete_riding(d, activity_key, scheduled, next_id, [COMPLETE])
    assert verdict(replies)["accepted"] is False and "last completed task" in verdict(replies)["reason"]
    assert len(queued(d, key)) == 3  # the cache is behind: through the queue
    d.complete(key, [COMPLETE])
    d.check(key)


def test_refused_when_another_activity_s_completion_came_first(d):
    key, _ = d.start()
    scheduled = d.task(key)["scheduled_event_id"]
    other = {**EAGER, "activity_id": "2"}
    _, replies = d.send("TASK_COMPLETE", key, request_id="req-task", reply_partition=2, scheduled_event_id=scheduled,
                        attempt=0, identity="worker-7", commands=orjson.dumps([EAGER, other]).decode())
    first, second = [r.key for r in replies if r.value_type == "ACTIVITY_TASK"]
    next_id = d.run(key)["next_event_id"]
    # The code waits for both: the first one's task answers with nothing, riding along.
    assert verdict(complete_riding(d, first, scheduled, next_id, []))["accepted"] is True
    replies = complete_riding(d, second, scheduled, next_id + 2, [COMPLETE])  # as if the first never came
    assert verdict(replies)["accepted"] is False and "last completed task" in verdict(replies)["reason"]
    d.complete(key, [COMPLETE])
    d.check(key)


def test_refused_when_the_next_event_id_is_not_the_worker_s(d):
    key, _ = d.start()
    activity_key, scheduled = eager_activity(d, key)
    next_id = d.run(key)["next_event_id"]
    replies = complete_riding(d, activity_key, scheduled, next_id + 1, [COMPLETE])
    assert verdict(replies)["accepted"] is False and "next event id" in verdict(replies)["reason"]
    assert any(r.intent == "WORKFLOW_TASK" for r in replies)  # handed back as without the answer
    d.complete(key, [COMPLETE])
    d.check(key)


def test_refused_when_the_run_was_canceled_first(d):
    key, _ = d.start()
    activity_key, scheduled = eager_activity(d, key)
    next_id = d.run(key)["next_event_id"]
    d.send("REQUEST_CANCEL", workflow_id="w1", run_id="", reason="stop", identity="me")
    replies = complete_riding(d, activity_key, scheduled, next_id, [COMPLETE])
    assert verdict(replies)["accepted"] is False
    d.complete(key, [])  # the task the cancel request made; the completion was buffered behind it
    d.complete(key, [COMPLETE])
    d.check(key)


def test_a_bad_command_in_the_answer_refuses_it_and_the_task_is_scheduled(d):
    key, _ = d.start()
    activity_key, scheduled = eager_activity(d, key)
    next_id = d.run(key)["next_event_id"]
    replies = complete_riding(d, activity_key, scheduled, next_id, [{"type": "NO_SUCH_COMMAND"}])
    assert verdict(replies)["accepted"] is False
    assert d.types(key)[-3:] == ["ACTIVITY_TASK_STARTED", "ACTIVITY_TASK_COMPLETED", "WORKFLOW_TASK_SCHEDULED"]
    d.complete(key, [COMPLETE])
    d.check(key)


def test_a_closed_run_refuses_the_completion_itself(d):
    key, _ = d.start()
    activity_key, scheduled = eager_activity(d, key)
    next_id = d.run(key)["next_event_id"]
    d.send("TERMINATE", workflow_id="w1", run_id="", reason="stop", identity="me")
    (rejection,) = complete_riding(d, activity_key, scheduled, next_id, [COMPLETE])
    assert rejection.rejection_type == "NOT_FOUND"


def test_replies_come_verdict_first_then_what_a_task_answer_gets(d):
    key, _ = d.start()
    activity_key, scheduled = eager_activity(d, key)
    next_eager = {**EAGER, "activity_id": "2"}
    replies = complete_riding(d, activity_key, scheduled, d.run(key)["next_event_id"], [next_eager])
    assert [(r.value_type, r.intent) for r in replies] == [
        ("WORKFLOW", "RODE_ALONG"), ("ACTIVITY_TASK", "ACTIVITY_TASK"), ("WORKFLOW", "TASK_PROCESSED")]
    assert replies[1].value["identity"] == "worker-7"  # the answer's eager activity, started for its worker
    assert "TASK_TIME_OUT" not in d.run(key)["deadlines"]  # no task deadline armed
    assert d.task(key) is None


def test_a_failure_never_carries_the_next_task_s_answer(d):
    """Only a COMPLETE closes the activity for sure: a FAIL may be retried (no close, no
    task), so an answer it carried is ignored and the task, if any, is scheduled as usual."""
    key, _ = d.start()
    activity_key, scheduled = eager_activity(d, key)
    answer = {"next_event_id": d.run(key)["next_event_id"], "commands": [COMPLETE], "identity": "worker-7"}
    _, replies = d.send_record(Record.command("ACTIVITY_TASK", "FAIL", {
        "attempt": 1, "failure": {"message": "no", "kind": "APPLICATION", "type": "Oops", "non_retryable": True},
        "return_workflow_task_after": scheduled, "workflow_task_answer": orjson.dumps(answer).decode()},
        key=activity_key, request_id="req-done", reply_partition=2))
    assert [r.intent for r in replies] == ["WORKFLOW_TASK"]  # handed back, no RODE_ALONG
    assert d.types(key)[-3:] == ["ACTIVITY_TASK_STARTED", "ACTIVITY_TASK_FAILED", "WORKFLOW_TASK_SCHEDULED"]
    d.complete(key, [COMPLETE])
    d.check(key)


def test_refused_when_an_update_came_first(d):
    key, _ = d.start()
    activity_key, scheduled = eager_activity(d, key)
    next_id = d.run(key)["next_event_id"]
    d.send("UPDATE", request_id="r-1", reply_partition=5, workflow_id="w1", update_id="u-1",
           update_name="remove_item", input='["a"]', update_stage="COMPLETED", identity="caller")
    replies = complete_riding(d, activity_key, scheduled, next_id, [COMPLETE])
    assert verdict(replies)["accepted"] is False and "is out" in verdict(replies)["reason"]
    assert d.run(key)["buffered"]  # behind the update's task, as without the answer


def test_refused_when_another_worker_answered_the_last_task(d):
    """A task redelivered after a rebalance can be answered by two workers, with commands
    of the same count: the one whose answer was rejected kept an instance the engine never
    saw, so its guess of the next task is refused even though every count matches."""
    key, _ = d.start()
    activity_key, scheduled = eager_activity(d, key)  # worker-7's answer is the one kept
    other = d.send("TASK_COMPLETE", key, scheduled_event_id=scheduled, attempt=0, identity="worker-8",
                   commands=orjson.dumps([EAGER]).decode())[1]
    assert any(r.record_type == "COMMAND_REJECTION" for r in other)  # worker-8's own answer is over
    next_id = d.run(key)["next_event_id"]
    replies = complete_riding(d, activity_key, scheduled, next_id, [COMPLETE], identity="worker-8")
    assert verdict(replies)["accepted"] is False and "answered by 'worker-7'" in verdict(replies)["reason"]
    assert any(r.intent == "WORKFLOW_TASK" for r in replies)  # handed back as without the answer
    d.complete(key, [COMPLETE])
    d.check(key)
