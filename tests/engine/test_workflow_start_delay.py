"""A delayed start (Temporal's start_delay) on the processor with a manual clock: the run
starts at once, its first workflow task waits for the delay (the first-task backoff a
cron workflow's first run waits on); what may end the wait early, as a Temporal server
1.32 does: a cancel request, a signal-with-start that finds the run, an update; a plain
signal does not."""

from __future__ import annotations

import orjson
import pytest

from streamproc.protocol import codec
from tests.engine.workflow_driver import S, rejections

T0 = 1_000_000  # the driver's start time
DELAY = 30 * S
STARTED_ONLY = ["WORKFLOW_EXECUTION_STARTED"]


def started(d, key: int) -> dict:
    return d.history(key)[0]["attributes"]


def describe(d) -> dict:
    _, (reply,) = d.send("DESCRIBE", workflow_id="w1")
    return orjson.loads(reply.value["attributes"])


def test_the_run_starts_at_once_and_its_first_task_comes_after_the_delay(d):
    key, run_id = d.start(start_delay_ms=DELAY, workflow_run_timeout_ms=60 * S)
    assert d.types(key) == STARTED_ONLY and d.workflow_tasks() == []
    s = started(d, key)
    assert (s["first_workflow_task_backoff_ms"], s["initiator"], s["attempt"]) == (DELAY, "UNSPECIFIED", 1)
    assert "cron_schedule" not in s
    # As Temporal's describe: running, executable at start + delay, one event, no task.
    info = describe(d)
    assert (info["status"], info["start_time_ms"], info["execution_time_ms"], info["history_length"],
            info["pending_workflow_task"]) == ("RUNNING", T0, T0 + DELAY, 1, None)
    # The run timeout counts from when the run becomes executable (SEMANTICS.md 3.2).
    assert info["run_expiration_ms"] == T0 + DELAY + 60 * S
    assert not d.run_until(T0 + DELAY - 1) and d.workflow_tasks() == []
    d.run_until(T0 + DELAY)
    assert d.types(key) == STARTED_ONLY + ["WORKFLOW_TASK_SCHEDULED"]
    (task,) = d.workflow_tasks()
    assert task.value["run_id"] == run_id and task.value["event_time_ms"] == T0 + DELAY
    d.complete(key, [{"type": "COMPLETE_WORKFLOW_EXECUTION", "result": '"done"'}])
    assert d.check(key)[-1]["event_type"] == "WORKFLOW_EXECUTION_COMPLETED"


def test_a_delay_under_a_second_is_kept_and_zero_is_no_delay(d):
    key, _ = d.start("sub", start_delay_ms=1500)
    assert started(d, key)["first_workflow_task_backoff_ms"] == 1500
    d.run_until(T0 + 1500)
    assert d.types(key)[-1] == "WORKFLOW_TASK_SCHEDULED"
    key, _ = d.start("zero", start_delay_ms=0)
    assert d.types(key) == STARTED_ONLY + ["WORKFLOW_TASK_SCHEDULED"]
    assert started(d, key)["first_workflow_task_backoff_ms"] == 0


def test_a_huge_delay_is_capped_at_100_years(d):
    key, _ = d.start(start_delay_ms=2**63 - 1)
    assert started(d, key)["first_workflow_task_backoff_ms"] == 100 * 365 * 86400 * S


@pytest.mark.parametrize("value, message", [
    ({"start_delay_ms": -1}, "An invalid WorkflowStartDelaySeconds is set on request. cause: negative duration"),
    ({"start_delay_ms": 5 * S, "cron_schedule": "* * * * *"},
     "CronSchedule and WorkflowStartDelay may not be used together."),
    ({"start_delay_ms": 0, "cron_schedule": "* * * * *"},
     "CronSchedule and WorkflowStartDelay may not be used together."),
])
def test_a_negative_delay_and_a_delay_with_a_cron_schedule_are_refused_with_temporals_messages(d, value, message):
    events, (reply,) = d.send("START", workflow_id="w1", workflow_type="Order", task_queue="orders", **value)
    assert (reply.rejection_type, reply.rejection_reason) == ("INVALID_ARGUMENT", message)
    assert rejections(events) and d.current_key("w1") is None


def test_a_signal_during_the_delay_is_recorded_and_waits_for_it(d):
    key, _ = d.start(start_delay_ms=DELAY)
    _, (reply,) = d.send("SIGNAL", workflow_id="w1", signal_name="poke", input='["early"]')
    assert reply.intent == "SIGNALED"
    assert d.types(key) == STARTED_ONLY + ["WORKFLOW_EXECUTION_SIGNALED"] and d.workflow_tasks() == []
    d.run_until(T0 + DELAY)
    assert d.types(key)[-1] == "WORKFLOW_TASK_SCHEDULED"
    assert [e["event_type"] for e in d.shown(key)] == d.types(key)


def test_a_signal_with_start_that_starts_the_run_waits_for_the_delay(d):
    key, _ = d.start(start_delay_ms=DELAY, signal_name="poke", signal_input='["hello"]')
    assert d.types(key) == STARTED_ONLY + ["WORKFLOW_EXECUTION_SIGNALED"] and d.workflow_tasks() == []
    d.run_until(T0 + DELAY)
    assert d.types(key)[-1] == "WORKFLOW_TASK_SCHEDULED"


def test_a_signal_with_start_that_finds_the_delayed_run_gives_it_its_first_task_at_once(d):
    key, _ = d.start(start_delay_ms=DELAY)
    d.clock.advance(5 * S)
    again, _ = d.start(start_delay_ms=DELAY, signal_name="poke", signal_input='["now"]')
    assert again == key
    assert d.types(key) == STARTED_ONLY + ["WORKFLOW_EXECUTION_SIGNALED", "WORKFLOW_TASK_SCHEDULED"]
    assert "BACKOFF_START" not in d.run(key)["deadlines"]
    d.complete(key, [])
    # The backoff's due date is gone: no second task when the delay would have ended.
    assert not d.run_until(T0 + DELAY + S)
    assert len(d.workflow_tasks()) == 1 and d.check(key, closed=False)[-1]["event_type"] == "WORKFLOW_TASK_COMPLETED"


def test_a_cancel_request_during_the_delay_gives_the_run_its_first_task_at_once(d):
    key, _ = d.start(start_delay_ms=DELAY)
    d.send("REQUEST_CANCEL", workflow_id="w1", reason="not needed")
    assert d.types(key) == STARTED_ONLY + ["WORKFLOW_EXECUTION_CANCEL_REQUESTED", "WORKFLOW_TASK_SCHEDULED"]
    d.complete(key, [{"type": "CANCEL_WORKFLOW_EXECUTION", "details": None}])
    assert d.check(key)[-1]["event_type"] == "WORKFLOW_EXECUTION_CANCELED"
    assert not d.run_until(T0 + DELAY + S)


def test_terminate_during_the_delay_closes_the_run_and_nothing_fires_later(d):
    key, _ = d.start(start_delay_ms=DELAY)
    _, (reply,) = d.send("TERMINATE", workflow_id="w1", reason="stop", identity="ops")
    assert reply.intent == "WORKFLOW_EXECUTION_TERMINATED"
    assert d.types(key) == STARTED_ONLY + ["WORKFLOW_EXECUTION_TERMINATED"]
    assert d.run(key)["deadlines"] == {} and describe(d)["status"] == "TERMINATED"
    assert not d.run_until(T0 + DELAY + S) and d.workflow_tasks() == []


def test_an_update_during_the_delay_gives_the_run_its_first_task_at_once_and_it_is_written(d):
    key, _ = d.start(start_delay_ms=DELAY)
    d.send("UPDATE", request_id="r-1", reply_partition=5, workflow_id="w1", update_id="u-1",
           update_name="approve", input="[]", update_stage="COMPLETED", identity="caller")
    # Not a speculative task: the run's code must start whatever the validator says.
    assert d.types(key) == STARTED_ONLY + ["WORKFLOW_TASK_SCHEDULED"]
    (task,) = d.workflow_tasks()
    assert [u["update_id"] for u in orjson.loads(task.value["attributes"])["updates"]] == ["u-1"]
    d.complete(key, [{"type": "REJECT_UPDATE", "update_id": "u-1",
                      "failure": {"message": "no", "kind": "APPLICATION", "type": "ValueError"}}])
    assert d.types(key)[-1] == "WORKFLOW_TASK_COMPLETED"
    assert [r.intent for r in d.replies if r.request_id == "r-1"] == ["UPDATE_REJECTED"]
    assert not d.run_until(T0 + DELAY + S)


def test_a_query_during_the_delay_is_refused_at_once_as_temporal_refuses_it(d):
    key, _ = d.start(start_delay_ms=DELAY)
    events, (reply,) = d.send("QUERY", reply_partition=3, workflow_id="w1", query_type="state", input="[]")
    assert (reply.rejection_type, reply.rejection_reason) == ("INVALID_STATE", "Workflow task is not scheduled yet.")
    assert [r for r in d.workflow_tasks() if r.intent == "QUERY_TASK"] == []
    d.run_until(T0 + DELAY)
    d.complete(key, [])
    d.send("QUERY", reply_partition=3, workflow_id="w1", query_type="state", input="[]")
    assert [r.intent for r in d.workflow_tasks()][-1] == "QUERY_TASK"


def test_a_json_start_carries_the_delay_in_milliseconds(d):
    body = {"value_type": "WORKFLOW", "intent": "START", "request_id": "r-2", "reply_partition": 0,
            "workflow": {"workflow_id": "report-1", "workflow_type": "Report", "task_queue": "reports",
                         "input": '["eu"]', "start_delay_ms": 1_800_000}}
    d.h.proc.process(orjson.dumps(body), [("content-type", codec.JSON_CONTENT_TYPE)], d.h.position)
    d.h.position += 1
    d.h.commit()
    key = d.current_key("report-1")
    assert d.types(key) == STARTED_ONLY and started(d, key)["first_workflow_task_backoff_ms"] == 1_800_000
