"""SIGNAL and signal-with-start: recorded before the sender is answered, buffered while a
task is out, deduplicated by request id, refused for closed runs and past the limit."""

from __future__ import annotations

import pytest

from streamproc.engine.processing import Limits
from tests.engine.workflow_driver import WorkflowDriver, attrs, rejections

TIMER = {"type": "START_TIMER", "timer_id": "1", "start_to_fire_timeout_ms": 3_600_000}
COMPLETE = {"type": "COMPLETE_WORKFLOW_EXECUTION", "result": '"done"'}


def _signal(d: WorkflowDriver, name: str = "add_item", arg: str = '["x"]', request_id: str | None = None, **value):
    return d.send("SIGNAL", request_id=request_id, workflow_id="w1", signal_name=name, input=arg,
                  identity="sender", **value)


def test_a_signal_is_recorded_with_a_new_task_and_acknowledged(d):
    key, run_id = d.start()
    d.complete(key, [TIMER])
    _, (reply,) = _signal(d, request_id="s-1")
    assert (reply.intent, reply.value["run_id"], reply.value["signal_name"]) == ("SIGNALED", run_id, "add_item")
    assert d.types(key)[-2:] == ["WORKFLOW_EXECUTION_SIGNALED", "WORKFLOW_TASK_SCHEDULED"]
    assert attrs(d.history(key), "WORKFLOW_EXECUTION_SIGNALED") == [
        {"signal_name": "add_item", "input": '["x"]', "identity": "sender", "external_workflow_execution": None}]
    assert d.shown(key)[-2]["event_type"] == "WORKFLOW_EXECUTION_SIGNALED"


def test_signals_while_a_task_is_out_are_buffered_in_order_and_follow_its_completion(d):
    key, _ = d.start()
    for n in range(3):
        _signal(d, arg=f'["{n}"]')
    assert d.types(key) == ["WORKFLOW_EXECUTION_STARTED", "WORKFLOW_TASK_SCHEDULED"]
    d.complete(key, [TIMER])
    events = d.check(key, closed=False)
    assert [e["event_type"] for e in events[2:]] == [
        "WORKFLOW_TASK_STARTED", "WORKFLOW_TASK_COMPLETED", "TIMER_STARTED",
        *["WORKFLOW_EXECUTION_SIGNALED"] * 3, "WORKFLOW_TASK_SCHEDULED"]
    assert [a["input"] for a in attrs(events, "WORKFLOW_EXECUTION_SIGNALED")] == ['["0"]', '["1"]', '["2"]']


def test_a_close_command_while_signals_wait_fails_the_task_so_the_workflow_sees_them(d):
    key, _ = d.start()
    _signal(d)
    d.complete(key, [COMPLETE])
    events = d.check(key, closed=False)
    assert attrs(events, "WORKFLOW_TASK_FAILED")[0]["cause"] == "UNHANDLED_COMMAND"
    assert events[-2:][0]["event_type"] == "WORKFLOW_EXECUTION_SIGNALED"
    d.complete(key, [COMPLETE])
    assert d.check(key)[-1]["event_type"] == "WORKFLOW_EXECUTION_COMPLETED"


def test_a_signal_sent_again_with_its_request_id_is_applied_once(d):
    key, _ = d.start()
    d.complete(key, [TIMER])
    _signal(d, request_id="same")
    events, (again,) = _signal(d, request_id="same")
    assert again.intent == "SIGNALED" and events == []
    assert len(attrs(d.history(key), "WORKFLOW_EXECUTION_SIGNALED")) == 1
    _signal(d, request_id="other")  # buffered: the first signal's task is out
    _signal(d, request_id="other")
    d.complete(key, [])
    assert len(attrs(d.history(key), "WORKFLOW_EXECUTION_SIGNALED")) == 2
    assert d.run(key)["signal_count"] == 2


def test_a_signal_to_a_closed_run_or_an_unknown_workflow_is_refused(d):
    key, run_id = d.start()
    d.complete(key, [COMPLETE])
    (closed,) = rejections(_signal(d)[0])
    assert closed.rejection_type == "INVALID_STATE"
    assert closed.rejection_reason.startswith("workflow execution already completed")
    (missing,) = rejections(d.send("SIGNAL", workflow_id="nope", signal_name="s", input="[]")[0])
    assert missing.rejection_type == "NOT_FOUND"


@pytest.mark.parametrize("value, message", [
    ({"signal_name": ""}, "SignalName is not set on request."),
    ({"input": "{not json"}, "signal input is not valid JSON"),
    ({"input": '["' + "x" * 300_000 + '"]'}, "more than the limit of 262144"),
])
def test_a_bad_signal_is_refused_and_records_nothing(d, value, message):
    key, _ = d.start()
    before = d.types(key)
    (rejection,) = rejections(d.send("SIGNAL", workflow_id="w1", **{"signal_name": "s", "input": "[]", **value})[0])
    assert rejection.rejection_type == "INVALID_ARGUMENT" and message in rejection.rejection_reason
    assert d.types(key) == before


def test_a_run_records_at_most_the_signal_limit(tmp_path):
    d = WorkflowDriver(tmp_path / "s", limits=Limits(max_signals_per_run=2))
    try:
        key, _ = d.start()
        _signal(d)
        _signal(d)
        (refused,) = rejections(_signal(d)[0])
        assert refused.rejection_reason == "exceeded workflow execution limit for signal events"
        d.complete(key, [TIMER])
        assert len(attrs(d.history(key), "WORKFLOW_EXECUTION_SIGNALED")) == 2
    finally:
        d.close()


def test_signal_with_start_records_the_signal_before_the_first_task(d):
    _, (reply,) = d.send("START", request_id="sws", workflow_id="w1", workflow_type="Order", task_queue="orders",
                         input="[]", signal_name="approve", signal_input='[true]')
    assert reply.intent == "STARTED"
    key = reply.key
    assert d.types(key) == ["WORKFLOW_EXECUTION_STARTED", "WORKFLOW_EXECUTION_SIGNALED", "WORKFLOW_TASK_SCHEDULED"]
    assert attrs(d.history(key), "WORKFLOW_EXECUTION_SIGNALED")[0]["input"] == "[true]"
    # The same request again (a client across an outage): the same run, no second signal.
    _, (again,) = d.send("START", request_id="sws", workflow_id="w1", workflow_type="Order", task_queue="orders",
                         input="[]", signal_name="approve", signal_input='[true]')
    assert again.value["run_id"] == reply.value["run_id"]
    assert len(attrs(d.history(key), "WORKFLOW_EXECUTION_SIGNALED")) == 1


def test_signal_with_start_signals_the_running_run_instead_of_starting(d):
    key, run_id = d.start()
    d.complete(key, [TIMER])
    _, (reply,) = d.send("START", request_id="sws-2", workflow_id="w1", workflow_type="Order", task_queue="orders",
                         input="[]", signal_name="approve", signal_input="[]")
    assert reply.intent == "STARTED" and reply.value["run_id"] == run_id
    assert '"started":false' in reply.value["attributes"]
    assert d.types(key)[-2:] == ["WORKFLOW_EXECUTION_SIGNALED", "WORKFLOW_TASK_SCHEDULED"]


def test_signal_with_start_refuses_the_fail_conflict_policy(d):
    (rejection,) = rejections(d.send("START", workflow_id="w1", workflow_type="Order", task_queue="orders",
                                     input="[]", signal_name="s", id_conflict_policy="FAIL")[0])
    assert rejection.rejection_reason == ("Invalid WorkflowIDConflictPolicy: WORKFLOW_ID_CONFLICT_POLICY_FAIL "
                                          "is not supported for this operation.")
