"""START: validation, normalised timeouts, the first workflow task (paged), id policies."""

from __future__ import annotations

import uuid

import orjson
import pytest

from streamproc.engine.processing import Limits
from tests.engine.workflow_driver import S, WorkflowDriver, attrs, rejections


def test_start_writes_started_and_task_scheduled_and_publishes_the_task(d):
    run_key, run_id = d.start(workflow_execution_timeout_ms=3600 * S, identity="client-1")
    assert str(uuid.UUID(run_id)) == run_id
    events = d.check(run_key, closed=False)
    assert [e["event_type"] for e in events] == ["WORKFLOW_EXECUTION_STARTED", "WORKFLOW_TASK_SCHEDULED"]
    started = events[0]["attributes"]
    # WT2: execution 1h, run unset -> run 1h, task 10 s
    assert (started["workflow_execution_timeout_ms"], started["workflow_run_timeout_ms"],
            started["workflow_task_timeout_ms"]) == (3600 * S, 3600 * S, 10 * S)
    assert started["attempt"] == 1 and started["first_execution_run_id"] == run_id
    assert started["workflow_execution_expiration_time_ms"] == 1_000_000 + 3600 * S
    assert events[1]["attributes"] == {"task_queue": "orders", "start_to_close_timeout_ms": 10 * S, "attempt": 1}
    (task,) = d.workflow_tasks()
    assert d.h.tasks[0][0] == "orders" and task.intent == "WORKFLOW_TASK" and task.key == run_key
    assert (task.value["workflow_id"], task.value["run_id"], task.value["scheduled_event_id"],
            task.value["attempt"], task.value["page"], task.value["pages"]) == ("w1", run_id, 2, 1, 0, 1)
    assert orjson.loads(task.value["history"]) == events
    # every history event is also on the events topic, intent = the event type
    on_topic = [(r.intent, r.value["event_id"]) for r in d.h.events if r.value_type == "WORKFLOW"]
    assert on_topic == [("WORKFLOW_EXECUTION_STARTED", 1), ("WORKFLOW_TASK_SCHEDULED", 2)]
    # the caller gets one answer, not the history events
    assert [r.intent for r in d.replies] == ["STARTED"]


@pytest.mark.parametrize("value, message", [
    ({"workflow_id": ""}, "WorkflowId is not set on request."),
    ({"workflow_id": "x" * 1001}, "WorkflowId exceeds maximum allowed length (1001/1000)"),
    ({"workflow_run_timeout_ms": -1000},
     "An invalid WorkflowRunTimeoutSeconds is set on request. cause: negative duration"),
    ({"retry_policy": {"maximum_attempts": -1}}, "MaximumAttempts cannot be negative on retry policy."),
    ({"id_reuse_policy": "TERMINATE_IF_RUNNING", "id_conflict_policy": "FAIL"},
     "Invalid WorkflowIDReusePolicy: WORKFLOW_ID_REUSE_POLICY_TERMINATE_IF_RUNNING cannot be used "
     "together with a WorkflowIDConflictPolicy"),
    ({"task_queue": "no spaces"}, "task queue must be 1-200 characters"),
])
def test_invalid_starts_are_rejected_with_temporal_messages(d, value, message):
    start = {"workflow_id": "w1", "workflow_type": "Order", "task_queue": "orders", **value}
    events, (reply,) = d.send("START", **start)
    assert reply.rejection_type == "INVALID_ARGUMENT" and reply.rejection_reason.startswith(message)
    assert rejections(events) and d.workflow_tasks() == []


INT64_MAX, HUNDRED_YEARS_MS = 2**63 - 1, 100 * 365 * 86400 * S


def test_int64_timeouts_are_capped_at_100_years_and_int64_min_is_refused_as_negative(d):
    """Any int64 of milliseconds is a duration the engine understands (Temporal caps every
    duration at 100 years); none makes processing fail."""
    key, _ = d.start("huge", workflow_execution_timeout_ms=INT64_MAX, workflow_run_timeout_ms=INT64_MAX,
                     retry_policy={"initial_interval_ms": INT64_MAX, "maximum_interval_ms": INT64_MAX})
    started = d.history(key)[0]["attributes"]
    assert (started["workflow_execution_timeout_ms"], started["workflow_run_timeout_ms"]) == (HUNDRED_YEARS_MS,) * 2
    events, (reply,) = d.send("START", workflow_id="w-neg", workflow_type="Order", task_queue="orders",
                              workflow_run_timeout_ms=-(2**63))
    assert reply.rejection_type == "INVALID_ARGUMENT"
    assert reply.rejection_reason.startswith("An invalid WorkflowRunTimeoutSeconds is set on request. cause: "
                                             "negative duration")


def test_task_timeout_is_capped_silently_at_120s_and_at_the_run_timeout(d):
    key, _ = d.start("a", workflow_task_timeout_ms=300 * S)  # WT6
    assert d.history(key)[0]["attributes"]["workflow_task_timeout_ms"] == 120 * S
    key, _ = d.start("b", workflow_run_timeout_ms=5 * S)  # WT5
    assert d.history(key)[1]["attributes"]["start_to_close_timeout_ms"] == 5 * S


def test_a_large_history_travels_in_several_pages(tmp_path):
    d = WorkflowDriver(tmp_path / "paged", limits=Limits(max_history_page_bytes=600))
    try:
        key, _ = d.start(input=orjson.dumps(["y" * 400]).decode())
        d.complete(key, [{"type": "RECORD_MARKER", "marker_name": f"m{i}", "details": "z" * 200}
                         for i in range(3)] + [{"type": "START_TIMER", "timer_id": "1",
                                                "start_to_fire_timeout_ms": S}])
        d.run_until(d.clock.now_ms() + 2 * S)
        pages = [t for t in d.workflow_tasks() if t.value["scheduled_event_id"] == d.task(key)["scheduled_event_id"]]
        assert len(pages) > 2 and [p.value["page"] for p in pages] == list(range(len(pages)))
        assert all(p.value["pages"] == len(pages) for p in pages)
        assert all(len(p.value["history"]) <= 600 for p in pages[1:])
        assembled = [e for p in pages for e in orjson.loads(p.value["history"])]
        # from the completed first task's Scheduled (event 2) on: its worker has event 1
        assert {p.value["first_event_id"] for p in pages} == {2}
        assert assembled == d.check(key, closed=False)[1:]
        assert assembled[-1]["event_type"] == "WORKFLOW_TASK_SCHEDULED"
    finally:
        d.close()


# --- id reuse and conflict policies (SEMANTICS.md 4 and 13) --------------------------------


def test_running_id_is_rejected_with_already_exists(d):  # ID1
    _, run_id = d.start()
    _, (reply,) = d.send("START", workflow_id="w1", workflow_type="Order", task_queue="orders")
    assert reply.rejection_type == "ALREADY_EXISTS"
    assert reply.rejection_reason == f"Workflow execution is already running. WorkflowId: w1, RunId: {run_id}."


def test_same_request_id_returns_the_run_it_started(d):  # ID2
    key, run_id = d.start(request_id="req-1")
    _, (reply,) = d.send("START", request_id="req-1", workflow_id="w1", workflow_type="Order", task_queue="orders")
    assert (reply.intent, reply.key, reply.value["run_id"]) == ("STARTED", key, run_id)
    assert orjson.loads(reply.value["attributes"]) == {"started": True}


def test_use_existing_returns_the_running_run_not_started(d):  # ID3
    key, run_id = d.start()
    _, (reply,) = d.send("START", workflow_id="w1", workflow_type="Order", task_queue="orders",
                         id_conflict_policy="USE_EXISTING")
    assert (reply.intent, reply.value["run_id"]) == ("STARTED", run_id)
    assert orjson.loads(reply.value["attributes"]) == {"started": False}
    assert len(d.workflow_tasks()) == 1


def test_terminate_if_running_terminates_and_starts_a_new_run(d):  # ID4
    old_key, old_run = d.start()
    new_key, new_run = d.start(id_reuse_policy="TERMINATE_IF_RUNNING")
    assert new_key != old_key and new_run != old_run
    events = d.check(old_key)
    assert attrs(events, "WORKFLOW_EXECUTION_TERMINATED") == [{
        "reason": "TerminateIfRunning WorkflowIdReusePolicy", "details": f"terminated by new runID: {new_run}",
        "identity": "history-service"}]
    assert d.run(old_key)["status"] == "TERMINATED" and d.run(new_key)["status"] == "RUNNING"


def _complete_workflow(d, key):
    d.complete(key, [{"type": "COMPLETE_WORKFLOW_EXECUTION", "result": '"done"'}])


def test_failed_only_refuses_after_a_successful_run(d):  # ID5
    key, run_id = d.start()
    _complete_workflow(d, key)
    _, (reply,) = d.send("START", workflow_id="w1", workflow_type="Order", task_queue="orders",
                         id_reuse_policy="ALLOW_DUPLICATE_FAILED_ONLY")
    assert reply.rejection_type == "ALREADY_EXISTS"
    assert reply.rejection_reason == (
        f"Workflow execution already finished successfully. WorkflowId: w1, RunId: {run_id}. "
        "Workflow Id reuse policy: allow duplicate workflow Id if last run failed.")


def test_failed_only_allows_after_a_timed_out_run(d):  # ID6
    key, _ = d.start(workflow_run_timeout_ms=5 * S)
    d.run_until(d.clock.now_ms() + 6 * S)
    assert d.run(key)["status"] == "TIMED_OUT"
    new_key, _ = d.start(id_reuse_policy="ALLOW_DUPLICATE_FAILED_ONLY")
    assert new_key != key


def test_reject_duplicate_refuses_after_a_failed_run(d):  # ID7
    key, run_id = d.start()
    d.complete(key, [{"type": "FAIL_WORKFLOW_EXECUTION", "failure": {"message": "no", "kind": "APPLICATION"}}])
    _, (reply,) = d.send("START", workflow_id="w1", workflow_type="Order", task_queue="orders",
                         id_reuse_policy="REJECT_DUPLICATE")
    assert reply.rejection_reason == (
        f"Workflow execution already finished. WorkflowId: w1, RunId: {run_id}. "
        "Workflow Id reuse policy: reject duplicate workflow Id.")


def test_default_policy_starts_a_new_run_after_completion(d):
    key, _ = d.start()
    _complete_workflow(d, key)
    new_key, _ = d.start()
    assert new_key != key and d.run(new_key)["status"] == "RUNNING"
