"""POLL_UPDATE: a caller that knows only an update's id waits for its outcome (Temporal's
PollWorkflowExecutionUpdate), answered by the engine when the outcome is recorded, or at
once when it is; an unknown (or rejected) update id is NOT_FOUND with Temporal's words."""

from __future__ import annotations

import pytest

from tests.engine.test_workflow_updates import FAILURE, _answers, _update
from streamproc.engine.workflows.updates import MAX_UPDATE_WAITERS
from tests.engine.workflow_driver import rejections


def _poll(d, update_id="u-1", request_id="p-1", stage="", reply_partition=7, **value):
    return d.send("POLL_UPDATE", request_id=request_id, reply_partition=reply_partition,
                  **{"workflow_id": "w1", "update_id": update_id, "update_stage": stage, **value})


def test_a_poll_waits_for_an_update_someone_else_sent_and_hears_its_result(d, running):
    _update(d, stage="ACCEPTED", request_id="r-sender")
    d.complete(running, [{"type": "ACCEPT_UPDATE", "update_id": "u-1"}])
    events, replies = _poll(d)
    assert events == [] and replies == []  # it waits; nothing is written
    _poll(d)  # asked again with the same request id (its wait timed out): it still waits once
    d.send("SIGNAL", workflow_id="w1", signal_name="go", input="[]")
    d.complete(running, [{"type": "COMPLETE_UPDATE", "update_id": "u-1", "result": '"done"'}])
    (answer,) = _answers(d, "p-1")
    assert (answer.intent, answer.value["result"]) == ("UPDATE_COMPLETED", '"done"')
    assert (answer.value["update_id"], answer.value["update_name"]) == ("u-1", "remove_item")
    assert [a.intent for a in _answers(d, "r-sender")] == ["UPDATE_ACCEPTED"]


def test_a_poll_for_a_completed_update_is_answered_at_once_even_after_the_run_closed(d, running):
    _update(d)
    d.complete(running, [{"type": "ACCEPT_UPDATE", "update_id": "u-1"},
                         {"type": "COMPLETE_UPDATE", "update_id": "u-1", "failure": FAILURE}])
    d.send("TERMINATE", workflow_id="w1", reason="enough")
    events, (answer,) = _poll(d)
    assert events == [] and answer.intent == "UPDATE_COMPLETED"
    assert answer.value["failure"]["message"] == "no item zzz"
    _, (accepted,) = _poll(d, request_id="p-2", stage="ACCEPTED")
    assert accepted.intent == "UPDATE_COMPLETED"


def test_a_poll_for_an_update_the_close_aborted_hears_the_failure(d, running):
    _update(d)
    d.complete(running, [{"type": "ACCEPT_UPDATE", "update_id": "u-1"}])
    _poll(d)
    d.send("TERMINATE", workflow_id="w1", reason="enough")
    (answer,) = _answers(d, "p-1")
    assert answer.intent == "UPDATE_REJECTED" and answer.value["failure"]["message"] == (
        "Workflow Update failed because the Workflow completed before the Update completed.")


def test_an_unknown_or_rejected_update_id_is_not_found_with_temporals_words(d, running):
    (refused,) = rejections(_poll(d, update_id="nope")[0])
    assert (refused.rejection_type, refused.rejection_reason) == ("NOT_FOUND", 'update "nope" not found')
    _update(d)
    d.complete(running, [{"type": "REJECT_UPDATE", "update_id": "u-1", "failure": FAILURE}])
    (refused,) = rejections(_poll(d, request_id="p-2")[0])
    assert refused.rejection_reason == 'update "u-1" not found'
    (refused,) = rejections(_poll(d, workflow_id="no-such-workflow")[0])
    assert refused.rejection_type == "NOT_FOUND" and "workflow execution not found" in refused.rejection_reason


def test_the_callers_waiting_on_one_update_are_limited(d, running):
    _update(d)
    for n in range(MAX_UPDATE_WAITERS - 1):  # the sender waits too
        _poll(d, request_id=f"p-{n}")
    (refused,) = rejections(_poll(d, request_id="one-too-many")[0])
    assert refused.rejection_type == "RESOURCE_EXHAUSTED"
    assert rejections(_poll(d, request_id="p-0")[0]) == []  # one that waits already asks again


@pytest.mark.parametrize("value, message", [
    ({"update_id": ""}, "UpdateId is not set on request."),
    ({"update_stage": "SOON"}, "update_stage must be ACCEPTED or COMPLETED"),
    ({"reply_partition": -1}, "POLL_UPDATE needs a reply partition"),
])
def test_a_bad_poll_is_refused(d, running, value, message):
    (rejection,) = rejections(_poll(d, **value)[0])
    assert rejection.rejection_type == "INVALID_ARGUMENT" and message in rejection.rejection_reason
