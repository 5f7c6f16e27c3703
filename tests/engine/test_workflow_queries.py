"""QUERY: checked by the engine and handed to the run's task queue; nothing is written."""

from __future__ import annotations

import orjson
import pytest

from tests.engine.workflow_driver import rejections

COMPLETE = {"type": "COMPLETE_WORKFLOW_EXECUTION", "result": '"done"'}
FAIL = {"type": "FAIL_WORKFLOW_EXECUTION", "failure": {"message": "no", "kind": "APPLICATION", "type": "E"}}


def _query_tasks(d):
    return [r for _, r in d.h.tasks if r.intent == "QUERY_TASK"]


def _query(d, reply_partition: int = 3, **value):
    return d.send("QUERY", request_id="q-1", reply_partition=reply_partition,
                  **{"workflow_id": "w1", "query_type": "count", "input": "[]", **value})


def test_a_query_goes_to_the_runs_task_queue_with_the_callers_reply_partition_and_writes_nothing(d):
    key, run_id = d.start()
    d.complete(key, [])
    before = (d.types(key), d.run(key))
    events, replies = _query(d, input='[1]')
    assert events == [] and replies == []
    (task,) = _query_tasks(d)
    assert (task.key, task.request_id, task.reply_partition) == (key, "q-1", 3)
    assert {k: task.value[k] for k in ("workflow_id", "run_id", "query_type", "input", "task_queue")} == {
        "workflow_id": "w1", "run_id": run_id, "query_type": "count", "input": "[1]", "task_queue": "orders"}
    assert (d.types(key), d.run(key)) == before


@pytest.mark.parametrize("close, condition, rejected", [
    (COMPLETE, "NOT_OPEN", "COMPLETED"),
    (COMPLETE, "NOT_COMPLETED_CLEANLY", None),
    (FAIL, "NOT_COMPLETED_CLEANLY", "FAILED"),
    (FAIL, "NONE", None),
    (FAIL, "", None),
])
def test_the_reject_condition_decides_on_closed_runs(d, close, condition, rejected):
    key, _ = d.start()
    d.complete(key, [close])
    _, replies = _query(d, query_reject_condition=condition)
    if rejected is None:
        assert replies == [] and len(_query_tasks(d)) == 1
    else:
        (reply,) = replies
        assert reply.intent == "QUERY_REJECTED" and orjson.loads(reply.value["attributes"]) == {"status": rejected}
        assert _query_tasks(d) == []


@pytest.mark.parametrize("value, reply_partition, message", [
    ({"query_type": ""}, 0, "QueryType is not set on request."),
    ({"query_reject_condition": "SOMETIMES"}, 0, "query_reject_condition must be one of NONE, NOT_OPEN"),
    ({"input": "nope"}, 0, "query input is not valid JSON"),
    ({}, -1, "a query needs a reply partition"),
])
def test_a_bad_query_is_refused(d, value, reply_partition, message):
    d.start()
    (rejection,) = rejections(_query(d, reply_partition=reply_partition, **value)[0])
    assert rejection.rejection_type == "INVALID_ARGUMENT" and message in rejection.rejection_reason
    assert _query_tasks(d) == []


def test_a_query_for_an_unknown_workflow_is_not_found(d):
    (rejection,) = rejections(_query(d, workflow_id="nope")[0])
    assert rejection.rejection_type == "NOT_FOUND"


def test_a_query_while_events_wait_for_the_next_task_goes_out_after_it(d):
    key, _ = d.start()
    d.complete(key, [])
    d.send("SIGNAL", workflow_id="w1", signal_name="s", input="[]")  # a task is out now
    _query(d)  # nothing buffered: after that task, which shows the signal
    assert len(_query_tasks(d)) == 1
    d.send("SIGNAL", workflow_id="w1", signal_name="s", input="[]")  # buffered
    d.send("QUERY", request_id="q-2", reply_partition=4, workflow_id="w1", query_type="count", input="[]")
    assert len(_query_tasks(d)) == 1 and d.run(key)["waiting_queries"][0]["request_id"] == "q-2"
    d.complete(key, [])
    tasks = [r for _, r in d.h.tasks if r.key == key]
    assert [r.intent for r in tasks[-2:]] == ["WORKFLOW_TASK", "QUERY_TASK"]
    assert (tasks[-1].request_id, tasks[-1].reply_partition) == ("q-2", 4)
    assert "waiting_queries" not in d.run(key)
