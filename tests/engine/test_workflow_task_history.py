"""What history a workflow task carries: all of it for a run's first task and after a
failed or timed-out task, else only what follows the previous completed task."""

from __future__ import annotations

import orjson

from tests.engine.workflow_driver import S, WorkflowDriver

TIMER = {"type": "START_TIMER", "timer_id": "1", "start_to_fire_timeout_ms": S}


def carried(d: WorkflowDriver, run_key: int) -> tuple[int, list[dict]]:
    """(first_event_id, events) of the run's latest task record."""
    value = [t for t in d.workflow_tasks() if t.key == run_key][-1].value
    return value["first_event_id"], orjson.loads(value["history"])


def test_the_first_task_carries_the_whole_history(d):
    key, _ = d.start()
    assert carried(d, key) == (1, d.history(key))


def test_the_next_task_carries_what_follows_the_completed_task_from_its_scheduled_event(d):
    key, _ = d.start()
    d.complete(key, [TIMER])
    d.run_until(d.clock.now_ms() + 2 * S)
    first, events = carried(d, key)
    assert first == 2 and events == d.history(key)[1:]
    assert [e["event_type"] for e in events] == [
        "WORKFLOW_TASK_SCHEDULED", "WORKFLOW_TASK_STARTED", "WORKFLOW_TASK_COMPLETED", "TIMER_STARTED",
        "TIMER_FIRED", "WORKFLOW_TASK_SCHEDULED"]
    d.complete(key, [{**TIMER, "timer_id": "2"}])
    d.run_until(d.clock.now_ms() + 2 * S)
    assert carried(d, key) == (7, d.history(key)[6:])  # however long the run grows: one task's worth


def test_after_a_failed_or_timed_out_task_the_whole_history_goes_out_again(d):
    key, _ = d.start()
    d.complete(key, [TIMER])
    d.run_until(d.clock.now_ms() + 2 * S)
    d.fail_task(key)
    first, events = carried(d, key)
    assert first == 1 and events[:-1] == d.history(key)
    assert events[-1]["attributes"]["attempt"] == 2  # the transient retry
    d.run_until(d.clock.now_ms() + 11 * S)  # attempt 2 times out: attempt 3, whole history again
    first, events = carried(d, key)
    assert first == 1 and events[:-1] == d.history(key) and events[-1]["attributes"]["attempt"] == 3
    d.complete(key, [{**TIMER, "timer_id": "2"}], attempt=3)
    d.run_until(d.clock.now_ms() + 2 * S)
    # the completed attempt 3 was written as event 10 (after Started 8, Failed 9 of attempt 1)
    assert d.history(key)[9]["attributes"]["attempt"] == 3
    assert carried(d, key) == (10, d.history(key)[9:])


def test_a_new_run_after_continue_as_new_starts_with_its_whole_history(d):
    key, _ = d.start()
    d.complete(key, [{"type": "CONTINUE_AS_NEW_WORKFLOW_EXECUTION", "input": '["next"]'}])
    new_key = d.current_key("w1")
    assert new_key != key and carried(d, new_key) == (1, d.history(new_key))


def test_get_history_still_answers_with_the_whole_history(d):
    key, _ = d.start()
    d.complete(key, [TIMER])
    d.run_until(d.clock.now_ms() + 2 * S)
    _, replies = d.send("GET_HISTORY", workflow_id="w1", run_id="")
    (page,) = replies
    assert orjson.loads(page.value["history"]) == d.history(key)
