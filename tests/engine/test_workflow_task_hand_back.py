"""A workflow task answer that asks for the next task (Temporal's return_new_workflow_task)
gets it as a reply on its replies partition, not through the task queue, whenever the
answer makes one (a workflow task heartbeat, events buffered meanwhile); histories are
what the normal path writes, and a handed-back task whose worker is gone times out."""

from __future__ import annotations

import orjson

from streamproc.engine.processing import Limits
from tests.engine.workflow_driver import S, WorkflowDriver, attrs

FORCE = {"force_create_new_workflow_task": True}
RETURN = {"return_new_workflow_task": True}
MARKER = {"type": "RECORD_MARKER", "marker_name": "LocalActivity", "details": {"seq": "1", "result": "1"}}
COMPLETE = {"type": "COMPLETE_WORKFLOW_EXECUTION", "result": '"done"'}


def answer(d, key, commands, flags=None, reply_partition=5, identity="wf-worker-7"):
    """TASK_COMPLETE for the task out now, with the attributes `flags`; returns its replies."""
    task = d.task(key)
    _, replies = d.send("TASK_COMPLETE", key, request_id=f"req-{task['scheduled_event_id']}",
                        reply_partition=reply_partition, scheduled_event_id=task["scheduled_event_id"],
                        attempt=task["attempt"], identity=identity, commands=orjson.dumps(commands).decode(),
                        attributes=orjson.dumps(flags).decode() if flags else None)
    return replies


def queued(d, key):
    return [r for r in d.workflow_tasks() if r.key == key]


def checkpointed_steps(d, flags, steps=3):
    """A run whose worker records a marker per task (checkpointing), then completes."""
    key, _ = d.start()
    for _ in range(steps):
        d.clock.advance(7)
        answer(d, key, [MARKER], flags)
    answer(d, key, [COMPLETE])
    return key


def test_a_heartbeat_answer_that_asks_gets_the_next_task_as_its_reply_not_on_the_queue(d):
    key, run_id = d.start()
    (handed,) = answer(d, key, [MARKER], {**FORCE, **RETURN})
    assert (handed.value_type, handed.intent, handed.request_id, handed.key) == ("WORKFLOW", "WORKFLOW_TASK", "req-2", key)
    assert len(queued(d, key)) == 1  # only the first task went through the queue
    v = handed.value
    assert (v["run_id"], v["scheduled_event_id"], v["attempt"], v["pages"]) == (run_id, 6, 1, 1)
    shown = orjson.loads(v["history"])
    assert v["first_event_id"] == 2 and [e["event_id"] for e in shown] == [2, 3, 4, 5, 6]
    assert shown[-1]["event_type"] == "WORKFLOW_TASK_SCHEDULED"
    assert d.task(key)["handed_back"] is True
    # its worker answers it like any task
    assert answer(d, key, [COMPLETE], RETURN) == []
    d.check(key)


def test_histories_are_those_of_the_normal_path(tmp_path):
    histories = []
    for name, flags in (("normal", FORCE), ("handed", {**FORCE, **RETURN})):
        d = WorkflowDriver(tmp_path / name)
        key = checkpointed_steps(d, flags)
        run_id = d.run(key)["run_id"]
        histories.append(orjson.dumps(d.check(key)).decode().replace(run_id, "<run id>"))
        if name == "handed":
            assert len(queued(d, key)) == 1
        else:
            assert len(queued(d, key)) == 4
        d.close()
    assert histories[0] == histories[1]


def test_nothing_is_handed_back_without_the_ask_a_replies_partition_or_a_new_task(d):
    key, _ = d.start()
    assert answer(d, key, [MARKER], FORCE) == []  # not asked: through the queue
    assert len(queued(d, key)) == 2
    answer(d, key, [MARKER], {**FORCE, **RETURN}, reply_partition=-1)  # nowhere to hand it
    assert len(queued(d, key)) == 3
    assert answer(d, key, [], RETURN) == []  # asked, but nothing needs the workflow
    assert d.task(key) is None and len(queued(d, key)) == 3


def test_events_buffered_meanwhile_ride_with_the_handed_back_task_as_in_temporal(d):
    key, _ = d.start()
    d.send("SIGNAL", workflow_id="w1", signal_name="go", input='["a"]')  # buffered: the task is out
    (handed,) = answer(d, key, [], RETURN)  # no heartbeat: the signal makes the task
    shown = [e["event_type"] for e in orjson.loads(handed.value["history"])]
    assert shown[-2:] == ["WORKFLOW_EXECUTION_SIGNALED", "WORKFLOW_TASK_SCHEDULED"]
    assert len(queued(d, key)) == 1
    answer(d, key, [COMPLETE])
    d.check(key)


def test_a_handed_back_task_whose_worker_is_gone_times_out_and_goes_through_the_queue(d):
    key, _ = d.start()
    answer(d, key, [MARKER], {**FORCE, **RETURN})
    d.run_until(d.clock.now_ms() + 10 * S)
    assert d.types(key)[-3:] == ["WORKFLOW_TASK_SCHEDULED", "WORKFLOW_TASK_STARTED", "WORKFLOW_TASK_TIMED_OUT"]
    retry = queued(d, key)[-1]
    assert retry.value["attempt"] == 2 and retry.value["first_event_id"] == 1  # whole history, any worker
    assert d.task(key).get("handed_back") is None
    answer(d, key, [COMPLETE], RETURN)
    d.check(key)


def test_a_task_larger_than_one_record_goes_through_the_queue(tmp_path):
    d = WorkflowDriver(tmp_path / "paged", limits=Limits(max_history_page_bytes=400))
    key, _ = d.start()
    big = {**MARKER, "details": {"seq": "1", "result": orjson.dumps("x" * 500).decode()}}
    assert answer(d, key, [big], {**FORCE, **RETURN}) == []
    assert queued(d, key)[-1].value["pages"] > 1 and not d.task(key).get("handed_back")
    d.close()


def test_a_query_waits_for_the_handed_back_task_then_goes_out(d):
    key, _ = d.start()
    answer(d, key, [MARKER], {**FORCE, **RETURN})
    d.send("QUERY", request_id="q-1", reply_partition=3, workflow_id="w1", query_type="count", input="[]")
    assert [r for _, r in d.h.tasks if r.intent == "QUERY_TASK"] == []  # the worker may not have run it yet
    answer(d, key, [MARKER], {**FORCE, **RETURN})  # another handed back: the query goes out now
    (query,) = [r for _, r in d.h.tasks if r.intent == "QUERY_TASK"]
    assert query.request_id == "q-1" and "waiting_queries" not in d.run(key)


def test_eager_activities_come_first_and_the_handed_back_task_is_the_last_reply(d):
    key, _ = d.start()
    d.send("SIGNAL", workflow_id="w1", signal_name="go", input="[]")  # buffered: a new task follows
    eager = {"type": "SCHEDULE_ACTIVITY_TASK", "activity_id": "1", "activity_type": "reserve", "task_queue": "",
             "input": "[]", "start_to_close_timeout_ms": 10 * S, "request_eager_execution": True}
    replies = answer(d, key, [eager], RETURN)
    assert [r.intent for r in replies] == ["ACTIVITY_TASK", "WORKFLOW_TASK"]  # no TASK_PROCESSED after it
    assert attrs(d.history(key), "ACTIVITY_TASK_SCHEDULED")[0]["activity_id"] == "1"


def _query_tasks(d):
    return [r for _, r in d.h.tasks if r.intent == "QUERY_TASK"]


def test_a_query_behind_buffered_events_is_not_held_back_by_task_after_task_handed_back(d):
    """The queue path sends a query that waits for buffered events right after the next task;
    a handed-back next task would leave it waiting again, for as long as each task ends with
    new events buffered (a busy run), so that task goes through the queue, the query after it."""
    key, _ = d.start()
    answer(d, key, [MARKER], {**FORCE, **RETURN})  # handed back: a task is out
    d.send("SIGNAL", workflow_id="w1", signal_name="go", input='["a"]')  # buffered
    d.send("QUERY", request_id="q-1", reply_partition=3, workflow_id="w1", query_type="count", input="[]")
    for n in range(3):  # each answer finds a new signal buffered
        answer(d, key, [], RETURN)
        d.send("SIGNAL", workflow_id="w1", signal_name="go", input=f'["{n}"]')
    (query,) = _query_tasks(d)
    tasks = [r for _, r in d.h.tasks if r.key == key]
    at = tasks.index(query)
    assert tasks[at - 1].intent == "WORKFLOW_TASK" and tasks[at - 1].value["scheduled_event_id"] > 6, \
        "the query goes right after the task that shows the signal, on the same partition"
    assert "waiting_queries" not in d.run(key)


def test_a_query_behind_an_admitted_update_goes_after_the_task_that_carries_it(d):
    """As on the queue path: a query that came while an update waited for the next task is
    answered after that task, whether the task before was handed back or not."""
    key, _ = d.start()
    answer(d, key, [MARKER], {**FORCE, **RETURN})  # handed back: a task is out
    d.send("UPDATE", request_id="u-req", reply_partition=5, workflow_id="w1", update_id="u-1",
           update_name="remove_item", input='["a"]', update_stage="COMPLETED", identity="caller")
    d.send("QUERY", request_id="q-1", reply_partition=3, workflow_id="w1", query_type="count", input="[]")
    answer(d, key, [], RETURN)  # the update makes the next task
    (query,) = _query_tasks(d)
    tasks = [r for _, r in d.h.tasks if r.key == key]
    carrier = tasks[tasks.index(query) - 1]
    assert carrier.intent == "WORKFLOW_TASK" and "u-1" in (carrier.value["attributes"] or "")
