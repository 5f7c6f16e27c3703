"""A START sent again with the same request id (a client across a broker outage) starts
nothing new: the engine answers with the run that request id started, whether it is still
running, has continued as new, or has closed."""

from __future__ import annotations

import orjson

from tests.engine.workflow_driver import attrs

START = {"workflow_type": "Order", "task_queue": "orders", "input": '["x"]'}


def started_events(d) -> list:
    return [e for e in d.h.events if e.intent == "WORKFLOW_EXECUTION_STARTED"]


def resend(d, request_id="req-1", workflow_id="w1"):
    events, (reply,) = d.send("START", request_id=request_id, workflow_id=workflow_id, **START)
    assert reply.intent == "STARTED", reply.rejection_reason
    assert reply.request_id == request_id
    return events, reply


def test_a_repeated_start_answers_with_the_running_run(d):
    key, run_id = d.start(request_id="req-1")
    events, reply = resend(d)
    assert reply.value["run_id"] == run_id and reply.key == key
    assert orjson.loads(reply.value["attributes"]) == {"started": True}
    assert events == [] and len(started_events(d)) == 1 and len(d.workflow_tasks()) == 1


def test_a_repeated_start_after_the_run_completed_starts_no_second_run(d):
    key, run_id = d.start(request_id="req-1")
    d.complete(key, [{"type": "COMPLETE_WORKFLOW_EXECUTION", "result": '"done"'}])
    _, reply = resend(d)
    assert reply.value["run_id"] == run_id and len(started_events(d)) == 1
    assert d.run(key)["status"] == "COMPLETED"


def test_a_repeated_start_after_continue_as_new_answers_with_the_chains_current_run(d):
    key, first_run = d.start(request_id="req-1")
    d.complete(key, [{"type": "CONTINUE_AS_NEW_WORKFLOW_EXECUTION", "input": '["next"]'}])
    (can,) = attrs(d.check(key), "WORKFLOW_EXECUTION_CONTINUED_AS_NEW")
    _, reply = resend(d)
    assert reply.value["run_id"] == can["new_execution_run_id"] and len(started_events(d)) == 2
    new_key = d.current_key("w1")
    d.complete(new_key, [{"type": "COMPLETE_WORKFLOW_EXECUTION", "result": '"done"'}])
    _, reply = resend(d)  # the chain is closed: still no third run
    assert reply.value["run_id"] == can["new_execution_run_id"] and len(started_events(d)) == 2


def test_another_request_id_still_follows_the_id_policies(d):
    d.start(request_id="req-1")
    _, (reply,) = d.send("START", request_id="req-2", workflow_id="w1", **START)
    assert reply.rejection_type == "ALREADY_EXISTS" and "already running" in reply.rejection_reason
