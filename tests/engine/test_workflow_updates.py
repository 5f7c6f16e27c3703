"""UPDATE: admitted, carried to the code by a (speculative) task, accepted or rejected by
its validator, completed; callers answered at their stage; rejected updates leave no history."""

from __future__ import annotations

import orjson
import pytest

from streamproc.engine.processing import Limits
from tests.engine.workflow_driver import WorkflowDriver, rejections

TIMER = {"type": "START_TIMER", "timer_id": "1", "start_to_fire_timeout_ms": 3_600_000}
FAILURE = {"message": "no item zzz", "kind": "APPLICATION", "type": "ValueError", "non_retryable": False}


def _update(d, update_id="u-1", stage="COMPLETED", reply_partition=5, request_id="r-1", **value):
    return d.send("UPDATE", request_id=request_id, reply_partition=reply_partition,
                  **{"workflow_id": "w1", "update_id": update_id, "update_name": "remove_item",
                     "input": '["a"]', "update_stage": stage, "identity": "caller", **value})


def _carried(d, run_key):
    task = [r for r in d.workflow_tasks() if r.key == run_key and r.intent == "WORKFLOW_TASK"][-1]
    return orjson.loads(task.value["attributes"] or "{}").get("updates", [])


def _answers(d, request_id):
    return [r for r in d.replies if r.request_id == request_id]


def test_a_rejected_update_leaves_no_history(d, running):
    before = d.types(running)
    events, replies = _update(d)
    assert events == [] and replies == []  # the caller waits for the workflow's verdict
    assert d.types(running) == before  # the speculative task wrote nothing
    assert _carried(d, running) == [{"update_id": "u-1", "name": "remove_item", "input": '["a"]',
                                     "identity": "caller"}]
    d.complete(running, [{"type": "REJECT_UPDATE", "update_id": "u-1", "failure": FAILURE}])
    assert d.types(running) == before and d.task(running) is None
    (answer,) = _answers(d, "r-1")
    assert answer.intent == "UPDATE_REJECTED" and answer.reply_partition == -1
    assert answer.value["failure"]["message"] == "no item zzz"
    assert "u-1" not in d.run(running).get("updates", {})


def test_an_accepted_update_writes_accepted_and_completed_and_answers_each_stage(d, running):
    _update(d, stage="ACCEPTED", request_id="r-acc")
    _update(d, stage="COMPLETED", request_id="r-done")
    d.complete(running, [{"type": "ACCEPT_UPDATE", "update_id": "u-1"},
                         {"type": "COMPLETE_UPDATE", "update_id": "u-1", "result": "1"}])
    events = d.check(running, closed=False)
    assert [e["event_type"] for e in events[-5:]] == [
        "WORKFLOW_TASK_SCHEDULED", "WORKFLOW_TASK_STARTED", "WORKFLOW_TASK_COMPLETED",
        "WORKFLOW_EXECUTION_UPDATE_ACCEPTED", "WORKFLOW_EXECUTION_UPDATE_COMPLETED"]
    accepted, completed = events[-2]["attributes"], events[-1]["attributes"]
    assert accepted["protocol_instance_id"] == "u-1" and accepted["accepted_request_message_id"] == "u-1/request"
    assert accepted["accepted_request_sequencing_event_id"] == events[-5]["event_id"]
    assert accepted["accepted_request"]["input"] == {"name": "remove_item", "args": '["a"]'}
    assert completed["accepted_event_id"] == events[-2]["event_id"] and completed["outcome"] == {"success": "1"}
    assert [a.intent for a in _answers(d, "r-acc")] == ["UPDATE_ACCEPTED"]
    (done,) = _answers(d, "r-done")
    assert done.intent == "UPDATE_COMPLETED" and done.value["result"] == "1"
    # the same update id again: the recorded outcome at once, nothing new written
    events_again, (again,) = _update(d, request_id="r-again")
    assert again.intent == "UPDATE_COMPLETED" and again.value["result"] == "1" and events_again == []


def test_an_update_accepted_in_one_task_completes_in_a_later_one(d, running):
    _update(d)
    d.complete(running, [{"type": "ACCEPT_UPDATE", "update_id": "u-1"}])
    assert _answers(d, "r-1") == []
    assert d.run(running)["updates"]["u-1"]["state"] == "ACCEPTED"
    _, (reply,) = d.send("SIGNAL", workflow_id="w1", signal_name="go", input="[]")
    d.complete(running, [{"type": "COMPLETE_UPDATE", "update_id": "u-1",
                          "failure": {"message": "gone", "kind": "APPLICATION", "type": "E"}}])
    (answer,) = _answers(d, "r-1")
    assert answer.intent == "UPDATE_COMPLETED" and answer.value["failure"]["message"] == "gone"
    d.check(running, closed=False)


def test_an_update_sent_while_a_task_is_out_rides_the_next_task(d):
    key, _ = d.start()
    _update(d)
    assert _carried(d, key) == []  # the first task was out already
    d.complete(key, [TIMER])
    assert [u["update_id"] for u in _carried(d, key)] == ["u-1"]
    d.complete(key, [{"type": "REJECT_UPDATE", "update_id": "u-1", "failure": FAILURE}])
    assert _answers(d, "r-1")[0].intent == "UPDATE_REJECTED"


def test_an_update_the_code_did_not_answer_fails_and_the_run_goes_on(d, running):
    _update(d)
    d.complete(running, [])  # an SDK that knows nothing of updates
    (answer,) = _answers(d, "r-1")
    assert answer.intent == "UPDATE_REJECTED" and "was not handled by the workflow" in answer.value["failure"]["message"]


def test_a_run_that_closes_fails_its_unfinished_updates(d, running):
    _update(d, update_id="u-acc", request_id="r-acc")
    d.complete(running, [{"type": "ACCEPT_UPDATE", "update_id": "u-acc"}])
    _update(d, update_id="u-new", request_id="r-new")
    d.send("TERMINATE", workflow_id="w1", reason="enough")
    (acc,) = _answers(d, "r-acc")
    assert acc.intent == "UPDATE_REJECTED" and acc.value["failure"]["message"] == (
        "Workflow Update failed because the Workflow completed before the Update completed.")
    (new,) = _answers(d, "r-new")
    assert new.value["failure"]["message"] == "workflow execution already completed"
    (closed,) = rejections(_update(d, update_id="u-3", request_id="r-3")[0])
    assert closed.rejection_type == "INVALID_STATE"


def test_a_bad_answer_fails_the_task_which_goes_out_again_with_the_update(d, running):
    before = d.types(running)
    _update(d)
    d.complete(running, [{"type": "COMPLETE_UPDATE", "update_id": "u-1", "result": "1"}])
    assert d.types(running) == before  # a speculative task, like a transient one, fails without a trace
    assert d.task(running)["attempt"] == 2 and [u["update_id"] for u in _carried(d, running)] == ["u-1"]
    d.complete(running, [{"type": "ACCEPT_UPDATE", "update_id": "u-1"}, {"type": "COMPLETE_UPDATE", "update_id": "u-1", "result": "1"}])
    assert _answers(d, "r-1")[0].value["result"] == "1"
    d.check(running, closed=False)


@pytest.mark.parametrize("value, message", [
    ({"update_id": ""}, "UpdateId is not set on request."),
    ({"update_name": ""}, "Update name is not set on request."),
    ({"update_stage": "SOON"}, "update_stage must be ACCEPTED or COMPLETED"),
    ({"input": "nope"}, "update input is not valid JSON"),
])
def test_a_bad_update_is_refused(d, running, value, message):
    (rejection,) = rejections(_update(d, **value)[0])
    assert rejection.rejection_type == "INVALID_ARGUMENT" and message in rejection.rejection_reason


def test_in_flight_updates_are_limited(tmp_path):
    d = WorkflowDriver(tmp_path / "u", limits=Limits(max_in_flight_updates=2))
    try:
        key, _ = d.start()
        d.complete(key, [TIMER])
        _update(d, update_id="a")
        _update(d, update_id="b")
        (refused,) = rejections(_update(d, update_id="c")[0])
        assert refused.rejection_reason == "limit on number of concurrent in-flight updates has been reached (2)"
    finally:
        d.close()
