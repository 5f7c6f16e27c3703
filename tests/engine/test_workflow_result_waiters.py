"""Answers to the starter and to waiting clients: a run's close sent to the reply partition
a START or WAIT_RESULT named, in the transaction that closes the run."""

from __future__ import annotations

import orjson

from streamproc.engine.workflows.result_waiters import MAX_RESULT_WAITERS
from streamproc.protocol import codec
from streamproc.state.workflow_run import WorkflowRun
from streamproc.state.workflow_run_parts import ResultWaiter
from tests.engine.workflow_driver import S, rejections

COMPLETE = {"type": "COMPLETE_WORKFLOW_EXECUTION", "result": '"done"'}
RETRY = {"initial_interval_ms": S, "maximum_attempts": 2}


def target(request_id: str, partition: int = 3, follow_runs: bool = True) -> dict:
    return {"partition": partition, "request_id": request_id, "follow_runs": follow_runs}


def answers(d, request_id: str) -> list[tuple[int, str, str, dict]]:
    """(partition, intent, run id, attributes) of every close sent under `request_id`."""
    return [(p, r.intent, r.value["run_id"], orjson.loads(r.value["attributes"]))
            for p, r in d.h.replies if r.request_id == request_id]


def wait_result(d, **value):
    """WAIT_RESULT's acknowledgement."""
    (ack,) = [r for r in d.send("WAIT_RESULT", **value)[1] if r.intent == "RESULT_WAIT_ACCEPTED"]
    return ack


def test_the_close_is_sent_to_the_starter_in_the_transaction_that_closes_the_run(d):
    key, run_id = d.start(close_reply=target("close-1"))
    assert answers(d, "close-1") == []
    before = len(d.h.replies)
    d.send("TASK_COMPLETE", key, scheduled_event_id=d.task(key)["scheduled_event_id"], identity="w",
           commands=orjson.dumps([COMPLETE]).decode())
    # The same command's output holds the close event and its answer to the starter.
    (partition, reply), = [(p, r) for p, r in d.h.replies[before:] if r.request_id == "close-1"]
    assert partition == 3 and reply.intent == "WORKFLOW_EXECUTION_COMPLETED"
    close_event = d.check(key)[-1]
    assert reply.value["event_id"] == close_event["event_id"] and reply.value["run_id"] == run_id
    assert orjson.loads(reply.value["attributes"])["result"] == '"done"'
    codec.decode(codec.encode(reply))  # a record like any other on the replies topic
    assert d.run(key).get("result_waiters") is None  # nothing kept after the chain's close


def test_every_close_kind_is_sent(d):
    key, _ = d.start("failed", close_reply=target("f"))
    d.complete(key, [{"type": "FAIL_WORKFLOW_EXECUTION", "failure": {"message": "no", "kind": "APPLICATION"}}])
    key, _ = d.start("canceled", close_reply=target("c"))
    d.complete(key, [{"type": "START_TIMER", "timer_id": "t", "start_to_fire_timeout_ms": 3600 * S}])
    d.send("REQUEST_CANCEL", workflow_id="canceled")
    d.complete(key, [{"type": "CANCEL_WORKFLOW_EXECUTION", "details": None}])
    d.start("terminated", close_reply=target("t"))
    d.send("TERMINATE", workflow_id="terminated", reason="stop")
    d.start("timed-out", close_reply=target("o"), workflow_run_timeout_ms=10 * S)
    d.run_until(d.clock.now_ms() + 20 * S)
    assert [a[1] for rid in "fcto" for a in answers(d, rid)] == [
        "WORKFLOW_EXECUTION_FAILED", "WORKFLOW_EXECUTION_CANCELED", "WORKFLOW_EXECUTION_TERMINATED",
        "WORKFLOW_EXECUTION_TIMED_OUT"]
    assert answers(d, "t")[0][3]["reason"] == "stop"


def test_continue_as_new_is_sent_and_the_new_run_carries_the_waiter(d):
    key, first = d.start(close_reply=target("chain"))
    d.complete(key, [{"type": "CONTINUE_AS_NEW_WORKFLOW_EXECUTION", "input": '["next"]'}])
    (_, intent, run_id, attributes), = answers(d, "chain")
    assert (intent, run_id) == ("WORKFLOW_EXECUTION_CONTINUED_AS_NEW", first)
    second_key = d.current_key("w1")
    assert d.run(second_key)["run_id"] == attributes["new_execution_run_id"]
    assert d.run(second_key)["result_waiters"] == [[3, "chain", True]]
    d.complete(second_key, [COMPLETE])
    assert [(a[1], a[2]) for a in answers(d, "chain")][1:] == [
        ("WORKFLOW_EXECUTION_COMPLETED", attributes["new_execution_run_id"])]


def test_a_retry_run_carries_the_waiter_and_its_close_ends_the_wait(d):
    key, _ = d.start(close_reply=target("r"), retry_policy=RETRY)
    d.complete(key, [{"type": "FAIL_WORKFLOW_EXECUTION", "failure": {"message": "no", "kind": "APPLICATION"}}])
    (_, intent, _, attributes), = answers(d, "r")
    assert intent == "WORKFLOW_EXECUTION_FAILED" and attributes["new_execution_run_id"]
    d.run_until(d.clock.now_ms() + 2 * S)  # the retry's backoff
    d.complete(d.current_key("w1"), [COMPLETE])
    assert [a[1] for a in answers(d, "r")] == ["WORKFLOW_EXECUTION_FAILED", "WORKFLOW_EXECUTION_COMPLETED"]


def test_a_waiter_registered_later_gets_the_close_and_is_registered_once(d):
    key, run_id = d.start()
    for _ in range(2):  # sent again with the same close request id: one waiter
        ack = wait_result(d, workflow_id="w1", run_id="", close_reply=target("later", partition=5))
        assert orjson.loads(ack.value["attributes"]) == {"run_id": run_id, "closed": False}
    assert d.run(key)["result_waiters"] == [[5, "later", True]]
    d.complete(key, [COMPLETE])
    assert [(a[0], a[1]) for a in answers(d, "later")] == [(5, "WORKFLOW_EXECUTION_COMPLETED")]


def test_a_closed_run_is_answered_at_once_following_its_chain(d):
    key, first = d.start()
    d.complete(key, [{"type": "CONTINUE_AS_NEW_WORKFLOW_EXECUTION", "input": "[]"}])
    second = d.run(d.current_key("w1"))["run_id"]
    d.complete(d.current_key("w1"), [COMPLETE])
    # Named by its first run: the chain is followed to its last close.
    ack = wait_result(d, workflow_id="w1", run_id=first, close_reply=target("after"))
    assert orjson.loads(ack.value["attributes"]) == {"run_id": second, "closed": True}
    assert [(a[1], a[2], a[3]["result"]) for a in answers(d, "after")] == [
        ("WORKFLOW_EXECUTION_COMPLETED", second, '"done"')]
    # Without following runs: the close of the run named.
    d.send("WAIT_RESULT", workflow_id="w1", run_id=first, close_reply=target("own", follow_runs=False))
    assert [a[1] for a in answers(d, "own")] == ["WORKFLOW_EXECUTION_CONTINUED_AS_NEW"]


def test_a_resent_start_waits_once_and_a_closed_one_is_answered(d):
    key, run_id = d.start(request_id="s1", close_reply=target("c1"))
    _, (again,) = d.send("START", request_id="s1", workflow_id="w1", workflow_type="Order", task_queue="orders",
                         input="[]", close_reply=target("c1"))
    assert again.intent == "STARTED" and orjson.loads(again.value["attributes"]) == {
        "started": True, "close_reply": True}
    assert d.run(key)["result_waiters"] == [[3, "c1", True]]
    d.complete(key, [COMPLETE])
    d.send("START", request_id="s1", workflow_id="w1", workflow_type="Order", task_queue="orders", input="[]",
           close_reply=target("c2"))
    assert [a[1] for a in answers(d, "c1") + answers(d, "c2")] == ["WORKFLOW_EXECUTION_COMPLETED"] * 2


def test_limits_and_bad_requests_are_refused(d):
    key, _ = d.start()
    for n in range(MAX_RESULT_WAITERS):
        d.send("WAIT_RESULT", workflow_id="w1", close_reply=target(f"w{n}"))
    (full,) = rejections(d.send("WAIT_RESULT", workflow_id="w1", close_reply=target("one-more"))[0])
    assert full.rejection_type == "RESOURCE_EXHAUSTED"
    (missing,) = rejections(d.send("WAIT_RESULT", workflow_id="nope", close_reply=target("x"))[0])
    assert missing.rejection_type == "NOT_FOUND"
    (no_target,) = rejections(d.send("WAIT_RESULT", workflow_id="w1")[0])
    assert "needs a close_reply" in no_target.rejection_reason
    (bad,) = rejections(d.send("START", workflow_id="w2", workflow_type="Order", task_queue="orders",
                               close_reply=target("", partition=1))[0])
    assert bad.rejection_type == "INVALID_ARGUMENT" and "close_reply.request_id" in bad.rejection_reason
    d.complete(key, [COMPLETE])
    assert len(answers(d, "w0")) == 1 and answers(d, "one-more") == []


def test_a_json_start_names_its_close_reply_and_the_run_stores_it_typed(d):
    body = {"value_type": "WORKFLOW", "intent": "START", "request_id": "json-start", "reply_partition": 0,
            "workflow": {"workflow_id": "from-json", "workflow_type": "Order", "task_queue": "orders",
                         "close_reply": {"partition": 2, "request_id": "json-close"}}}
    d.h.proc.process(orjson.dumps(body), [("content-type", codec.JSON_CONTENT_TYPE)], d.h.position)
    d.h.position += 1
    d.h.commit()
    key = d.current_key("from-json")
    run = WorkflowRun.from_json(d.run(key))
    assert run.result_waiters == [ResultWaiter(2, "json-close", True)]
    assert WorkflowRun.from_json(run.to_json()).result_waiters == run.result_waiters
    d.complete(key, [COMPLETE])
    assert [(a[0], a[1]) for a in answers(d, "json-close")] == [(2, "WORKFLOW_EXECUTION_COMPLETED")]
