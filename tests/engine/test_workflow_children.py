"""Child workflows and signals / cancel requests between workflows, through the commands the
engine writes to the other workflow's partition (one partition here: `d.pump()` delivers)."""

from __future__ import annotations

import pytest

from tests.engine.workflow_driver import attrs

TIMER = {"type": "START_TIMER", "timer_id": "t", "start_to_fire_timeout_ms": 3_600_000}
COMPLETE = {"type": "COMPLETE_WORKFLOW_EXECUTION", "result": '"parent done"'}


def _child(policy: str = "", workflow_id: str = "child-1") -> dict:
    return {"type": "START_CHILD_WORKFLOW_EXECUTION", "workflow_id": workflow_id, "workflow_type": "Child",
            "task_queue": "", "input": '["x"]', "parent_close_policy": policy}


def _types(events):
    return [e["event_type"] for e in events]


def test_a_child_starts_reports_started_and_its_completion_reaches_the_parent(d):
    parent, parent_run = d.start()
    d.complete(parent, [_child()])
    assert _types(d.history(parent))[-1] == "START_CHILD_WORKFLOW_EXECUTION_INITIATED"
    d.pump()
    child = d.current_key("child-1")
    started = d.history(child)[0]["attributes"]
    assert started["parent_workflow_execution"] == {"workflow_id": "w1", "run_id": parent_run}
    assert started["parent_initiated_event_id"] == 5 and started["task_queue"] == "orders"
    assert _types(d.history(parent))[-2:] == ["CHILD_WORKFLOW_EXECUTION_STARTED", "WORKFLOW_TASK_SCHEDULED"]
    d.complete(parent, [TIMER])
    d.complete(child, [{"type": "COMPLETE_WORKFLOW_EXECUTION", "result": '"child result"'}])
    d.pump()
    events = d.check(parent, closed=False)
    (done,) = attrs(events, "CHILD_WORKFLOW_EXECUTION_COMPLETED")
    started_id = next(e["event_id"] for e in events if e["event_type"] == "CHILD_WORKFLOW_EXECUTION_STARTED")
    assert done["result"] == '"child result"' and done["initiated_event_id"] == 5
    assert done["started_event_id"] == started_id
    assert done["workflow_execution"]["workflow_id"] == "child-1"
    assert d.run(parent).get("children", {}) == {}


def test_a_child_id_that_is_running_fails_the_start(d):
    d.start(workflow_id="child-1")
    parent, _ = d.start(workflow_id="w1")
    d.complete(parent, [_child()])
    d.pump()
    (failed,) = attrs(d.history(parent), "START_CHILD_WORKFLOW_EXECUTION_FAILED")
    assert failed["cause"] == "WORKFLOW_ALREADY_EXISTS" and failed["initiated_event_id"] == 5


def test_the_parent_hears_only_the_end_of_the_childs_chain(d):
    parent, _ = d.start()
    d.complete(parent, [_child()])
    d.pump()
    d.complete(parent, [TIMER])
    child = d.current_key("child-1")
    d.complete(child, [{"type": "CONTINUE_AS_NEW_WORKFLOW_EXECUTION", "input": "[]"}])
    d.pump()
    assert "CHILD_WORKFLOW_EXECUTION_COMPLETED" not in _types(d.history(parent))
    second = d.current_key("child-1")
    assert second != child
    d.complete(second, [{"type": "COMPLETE_WORKFLOW_EXECUTION", "result": "2"}])
    d.pump()
    (done,) = attrs(d.history(parent), "CHILD_WORKFLOW_EXECUTION_COMPLETED")
    assert done["result"] == "2"


@pytest.mark.parametrize("policy, status, child_event", [
    ("", "TERMINATED", "WORKFLOW_EXECUTION_TERMINATED"),
    ("TERMINATE", "TERMINATED", "WORKFLOW_EXECUTION_TERMINATED"),
    ("REQUEST_CANCEL", "RUNNING", "WORKFLOW_EXECUTION_CANCEL_REQUESTED"),
    ("ABANDON", "RUNNING", None),
])
def test_the_parent_close_policy_applies_when_the_parent_closes(d, policy, status, child_event):
    parent, _ = d.start()
    d.complete(parent, [_child(policy)])
    d.pump()
    child = d.current_key("child-1")
    d.complete(child, [TIMER])
    d.complete(parent, [COMPLETE])
    d.pump()
    child_events = d.history(child)
    assert d.run(child)["status"] == status
    late = {"WORKFLOW_EXECUTION_TERMINATED", "WORKFLOW_EXECUTION_CANCEL_REQUESTED"} & set(_types(child_events))
    assert late == ({child_event} if child_event else set())
    if child_event == "WORKFLOW_EXECUTION_TERMINATED":
        assert child_events[-1]["attributes"]["reason"] == "by parent close policy"
        assert child_events[-1]["attributes"]["identity"] == "history-service"
    d.check(parent)


def test_the_policy_also_applies_on_continue_as_new_and_spares_a_successor_chain(d):
    parent, _ = d.start()
    d.complete(parent, [_child("TERMINATE")])
    d.pump()
    d.complete(parent, [{"type": "CONTINUE_AS_NEW_WORKFLOW_EXECUTION", "input": "[]"}])
    d.pump()
    assert _types(d.history(d.current_key("child-1")))[-1] == "WORKFLOW_EXECUTION_TERMINATED"


def test_signal_and_cancel_between_workflows_are_answered_to_the_sender(d):
    target, _ = d.start(workflow_id="target")
    d.complete(target, [TIMER])
    sender, sender_run = d.start(workflow_id="sender")
    d.complete(sender, [{"type": "SIGNAL_EXTERNAL_WORKFLOW_EXECUTION", "workflow_id": "target",
                         "signal_name": "hello", "input": '["hi"]'},
                        {"type": "SIGNAL_EXTERNAL_WORKFLOW_EXECUTION", "workflow_id": "nobody",
                         "signal_name": "hello", "input": "[]"},
                        {"type": "REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION", "workflow_id": "target"}])
    d.pump()
    d.complete(target, [])  # the cancel request arrived while the signal's task was out
    (signaled,) = attrs(d.history(target), "WORKFLOW_EXECUTION_SIGNALED")
    assert signaled["external_workflow_execution"] == {"workflow_id": "sender", "run_id": sender_run}
    (cancel,) = attrs(d.history(target), "WORKFLOW_EXECUTION_CANCEL_REQUESTED")
    assert cancel["external_workflow_execution"]["workflow_id"] == "sender"
    d.complete(sender, [])  # the answers after the first waited for the task it caused
    events = d.check(sender, closed=False)
    assert attrs(events, "EXTERNAL_WORKFLOW_EXECUTION_SIGNALED")[0]["initiated_event_id"] == 5
    assert attrs(events, "SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_FAILED")[0]["cause"] == "EXTERNAL_WORKFLOW_EXECUTION_NOT_FOUND"
    assert attrs(events, "EXTERNAL_WORKFLOW_EXECUTION_CANCEL_REQUESTED")[0]["initiated_event_id"] == 7
    assert d.run(sender).get("externals", {}) == {}


def test_a_child_only_signal_to_a_workflow_that_is_not_a_child_fails(d):
    target, _ = d.start(workflow_id="stranger")
    sender, _ = d.start(workflow_id="sender")
    d.complete(sender, [{"type": "SIGNAL_EXTERNAL_WORKFLOW_EXECUTION", "workflow_id": "stranger",
                         "signal_name": "s", "input": "[]", "child_workflow_only": True}])
    d.pump()
    assert attrs(d.history(sender), "SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_FAILED")
    assert not attrs(d.history(target), "WORKFLOW_EXECUTION_SIGNALED")


@pytest.mark.parametrize("command, message", [
    ({"workflow_id": ""}, "WorkflowId is not set on command."),
    ({"workflow_type": ""}, "WorkflowType is not set on command."),
    ({"parent_close_policy": "SOMETIMES"}, "parent_close_policy must be one of TERMINATE, REQUEST_CANCEL, ABANDON"),
    ({"input": "{"}, "input is not valid JSON"),
])
def test_bad_child_attributes_fail_the_task(d, command, message):
    parent, _ = d.start()
    d.complete(parent, [{**_child(), **command}])
    (failed,) = attrs(d.history(parent), "WORKFLOW_TASK_FAILED")
    assert failed["cause"] == "BAD_START_CHILD_EXECUTION_ATTRIBUTES" and message in failed["failure"]["message"]
