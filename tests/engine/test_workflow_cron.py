"""Cron workflows on the processor with a manual clock (SEMANTICS.md 7.2, 1.7, 3.3, 6.2):
the first run's wait, runs chained from their scheduled times with missed times skipped,
retries before cron, what each run inherits, and what ends the chain."""

from __future__ import annotations

from datetime import UTC, datetime

from streamproc.semantics.cron_workflow import INVALID_CRON_SCHEDULE, NO_TIME_CAN_BE_FOUND
from tests.engine.workflow_driver import S, rejections

M = 60 * S
T0 = int(datetime(2026, 5, 4, 0, 4, tzinfo=UTC).timestamp() * 1000)  # 00:04:00Z
AT_10 = T0 + 6 * M  # 00:10:00Z, the first cron time of "*/10 * * * *"
DRIVER_OPTIONS = {"start_ms": T0}

EVERY_10_MIN = "*/10 * * * *"
FAIL = {"type": "FAIL_WORKFLOW_EXECUTION", "failure": {"message": "bad report", "kind": "APPLICATION",
                                                       "type": "ReportError"}}


def complete(result: str) -> dict:
    return {"type": "COMPLETE_WORKFLOW_EXECUTION", "result": result}


def started(d, run_key: int) -> dict:
    return d.history(run_key)[0]["attributes"]


def next_run(d, closed_key: int) -> int:
    """The key of the run that followed `closed_key` (the current one), checked to be new."""
    key = d.current_key("w1")
    assert key != closed_key
    return key


def first_run_answered(d, commands: list, **start_options) -> tuple[int, int]:
    """Start the chain, answer its first run's task at 00:10 with `commands`: that run's
    key and the key of the run that followed it."""
    key, _ = d.start(cron_schedule=EVERY_10_MIN, **start_options)
    d.run_until(AT_10)
    d.complete(key, commands)
    return key, next_run(d, key)


def test_the_first_run_waits_for_the_first_cron_time_after_the_start(d):
    key, run_id = d.start(cron_schedule=EVERY_10_MIN)
    first = started(d, key)
    assert (first["cron_schedule"], first["initiator"], first["attempt"]) == (EVERY_10_MIN, "CRON_SCHEDULE", 1)
    assert first["first_workflow_task_backoff_ms"] == 6 * M
    assert d.run(key)["execution_time_ms"] == AT_10 and d.run(key)["cron_schedule"] == EVERY_10_MIN
    assert not d.run_until(AT_10 - 1) and d.workflow_tasks() == []
    d.run_until(AT_10)
    assert d.types(key) == ["WORKFLOW_EXECUTION_STARTED", "WORKFLOW_TASK_SCHEDULED"]
    assert d.workflow_tasks()[-1].value["run_id"] == run_id


def test_a_start_on_a_boundary_waits_a_whole_period(d):
    d.clock.set(AT_10)
    key, _ = d.start(cron_schedule=EVERY_10_MIN)
    assert started(d, key)["first_workflow_task_backoff_ms"] == 10 * M


def test_runs_chain_from_their_scheduled_time_and_missed_times_are_skipped(d):
    key, first_id = d.start(cron_schedule=EVERY_10_MIN)
    d.run_until(AT_10 + 3 * S)
    d.complete(key, [complete('"r1"')])
    closed = d.check(key)[-1]
    second = next_run(d, key)
    assert closed["event_type"] == "WORKFLOW_EXECUTION_COMPLETED"
    assert closed["attributes"]["new_execution_run_id"] == d.run(second)["run_id"]
    s2 = started(d, second)
    assert (s2["initiator"], s2["attempt"], s2["continued_execution_run_id"]) == ("CRON_SCHEDULE", 1, first_id)
    assert s2["first_workflow_task_backoff_ms"] == 10 * M - 3 * S  # to 00:20, not 10 min after the close
    assert s2["last_completion_result"] == '"r1"' and s2["continued_failure"] is None
    assert s2["first_execution_run_id"] == first_id and s2["cron_schedule"] == EVERY_10_MIN
    # The second run works for 25 minutes: 00:30 and 00:40 pass while it runs.
    d.run_until(AT_10 + 10 * M)
    d.complete(second, [{"type": "START_TIMER", "timer_id": "t", "start_to_fire_timeout_ms": 25 * M}])
    d.run_until(AT_10 + 35 * M)
    d.complete(second, [complete('"r2"')])
    third = next_run(d, second)
    assert started(d, third)["first_workflow_task_backoff_ms"] == 5 * M  # 00:50, the next time after 00:45
    assert started(d, third)["last_completion_result"] == '"r2"'
    d.check(second)


def test_retries_come_before_the_next_cron_run(d):
    key, _ = d.start(cron_schedule=EVERY_10_MIN, retry_policy={"initial_interval_ms": S, "maximum_attempts": 2})
    d.run_until(AT_10)
    d.complete(key, [FAIL])
    assert d.check(key)[-1]["attributes"]["retry_state"] == "IN_PROGRESS"
    retry = next_run(d, key)
    assert (started(d, retry)["initiator"], started(d, retry)["attempt"]) == ("RETRY", 2)
    assert started(d, retry)["cron_schedule"] == EVERY_10_MIN
    d.run_until(AT_10 + 2 * S)
    d.complete(retry, [FAIL])
    closed = d.check(retry)[-1]["attributes"]
    assert closed["retry_state"] == "MAXIMUM_ATTEMPTS_REACHED" and closed["new_execution_run_id"]
    cron_run = next_run(d, retry)
    s = started(d, cron_run)
    assert (s["initiator"], s["attempt"]) == ("CRON_SCHEDULE", 1)
    assert s["continued_failure"]["message"] == "bad report"
    # Counted from the retry run's execution time (00:10:01), the next time is 00:20.
    assert d.run(cron_run)["execution_time_ms"] == AT_10 + 10 * M


def test_a_retry_after_a_failure_gets_no_completion_result_and_passes_none_on(d):
    # As a Temporal server does (1.32): the retry of a failed run is started without the
    # last completion result, and the cron run after the retries reads it from there.
    _, second = first_run_answered(d, [complete('"A"')],
                                   retry_policy={"initial_interval_ms": S, "maximum_attempts": 2})
    assert started(d, second)["last_completion_result"] == '"A"'
    d.run_until(AT_10 + 10 * M)
    d.complete(second, [FAIL])
    retry = next_run(d, second)
    assert started(d, retry)["initiator"] == "RETRY" and "last_completion_result" not in started(d, retry)
    d.run_until(AT_10 + 10 * M + S)
    d.complete(retry, [FAIL])
    third = next_run(d, retry)
    assert started(d, third)["initiator"] == "CRON_SCHEDULE" and "last_completion_result" not in started(d, third)


def test_continue_as_new_leaves_the_cron_schedule_behind(d):
    _, continued = first_run_answered(d, [{"type": "CONTINUE_AS_NEW_WORKFLOW_EXECUTION", "input": '["again"]'}])
    assert started(d, continued)["initiator"] == "WORKFLOW" and "cron_schedule" not in started(d, continued)
    d.run_until(d.run(continued)["execution_time_ms"])
    d.complete(continued, [complete("1")])
    assert d.check(continued)[-1]["attributes"]["new_execution_run_id"] == ""
    assert d.current_key("w1") == continued


def test_a_failed_run_passes_on_the_failure_and_the_last_completion_result(d):
    _, second = first_run_answered(d, [complete('{"rows": 3}')])
    d.run_until(AT_10 + 10 * M)
    d.complete(second, [FAIL])
    assert d.check(second)[-1]["attributes"]["retry_state"] == "RETRY_POLICY_NOT_SET"
    third = next_run(d, second)
    s = started(d, third)
    assert s["continued_failure"]["type"] == "ReportError"
    assert s["last_completion_result"] == '{"rows": 3}'  # the last successful run's
    assert d.run(third)["execution_time_ms"] == AT_10 + 20 * M


def test_a_run_timeout_without_retry_is_followed_by_the_next_cron_run(d):
    _, second = first_run_answered(d, [complete('"r1"')], workflow_run_timeout_ms=4 * M)
    d.run_until(AT_10 + 14 * M)
    closed = d.check(second)[-1]
    assert closed["event_type"] == "WORKFLOW_EXECUTION_TIMED_OUT"
    assert closed["attributes"]["retry_state"] == "RETRY_POLICY_NOT_SET" and closed["attributes"]["new_execution_run_id"]
    third = next_run(d, second)
    s = started(d, third)
    assert s["initiator"] == "CRON_SCHEDULE" and s["continued_failure"]["message"] == "workflow timeout"
    assert s["last_completion_result"] == '"r1"'  # passed on from the timed-out run's start
    assert d.run(third)["execution_time_ms"] == AT_10 + 20 * M


def test_cancel_ends_the_chain(d):
    key, _ = d.start(cron_schedule=EVERY_10_MIN)
    d.run_until(AT_10)
    d.complete(key, [])
    d.send("REQUEST_CANCEL", workflow_id="w1", reason="stop it")
    d.complete(key, [{"type": "CANCEL_WORKFLOW_EXECUTION", "details": None}])
    assert d.check(key)[-1]["event_type"] == "WORKFLOW_EXECUTION_CANCELED"
    assert d.current_key("w1") == key and d.run(key)["deadlines"] == {}
    assert not d.run_until(AT_10 + 60 * M)


def test_a_cancel_during_the_wait_does_not_wait_for_the_cron_time(d):
    # A Temporal server (1.32) schedules the workflow task at once, cron, retry or delayed run.
    key, _ = d.start(cron_schedule=EVERY_10_MIN)
    d.clock.advance(M)
    d.send("REQUEST_CANCEL", workflow_id="w1", reason="stop it")
    assert d.types(key) == ["WORKFLOW_EXECUTION_STARTED", "WORKFLOW_EXECUTION_CANCEL_REQUESTED",
                            "WORKFLOW_TASK_SCHEDULED"]
    assert "BACKOFF_START" not in d.run(key)["deadlines"]
    d.complete(key, [{"type": "CANCEL_WORKFLOW_EXECUTION", "details": None}])
    assert d.check(key)[-1]["event_type"] == "WORKFLOW_EXECUTION_CANCELED"
    assert d.current_key("w1") == key and not d.run_until(AT_10 + 60 * M)


def test_a_signal_during_the_wait_waits_for_the_cron_time(d):
    key, _ = d.start(cron_schedule=EVERY_10_MIN)
    d.send("SIGNAL", workflow_id="w1", signal_name="poke", input="[]")
    assert d.types(key) == ["WORKFLOW_EXECUTION_STARTED", "WORKFLOW_EXECUTION_SIGNALED"]
    d.run_until(AT_10)
    assert d.types(key)[-1] == "WORKFLOW_TASK_SCHEDULED"


def test_a_signal_with_start_or_an_update_during_the_wait_does_not_wait_for_the_cron_time(d):
    # As a Temporal server (1.32): the same first-task backoff as a delayed start's.
    key, _ = d.start(cron_schedule=EVERY_10_MIN)
    d.start(cron_schedule=EVERY_10_MIN, signal_name="poke", signal_input="[]")
    assert d.types(key) == ["WORKFLOW_EXECUTION_STARTED", "WORKFLOW_EXECUTION_SIGNALED", "WORKFLOW_TASK_SCHEDULED"]
    d.start("w2", cron_schedule=EVERY_10_MIN)
    d.send("UPDATE", request_id="r-1", reply_partition=5, workflow_id="w2", update_id="u-1", update_name="set",
           input="[]", update_stage="COMPLETED", identity="caller")
    assert d.types(d.current_key("w2")) == ["WORKFLOW_EXECUTION_STARTED", "WORKFLOW_TASK_SCHEDULED"]


def test_terminate_during_the_wait_ends_the_chain(d):
    _, second = first_run_answered(d, [complete("1")])
    _, (reply,) = d.send("TERMINATE", workflow_id="w1", reason="enough", identity="ops")
    assert reply.intent == "WORKFLOW_EXECUTION_TERMINATED"
    assert d.types(second) == ["WORKFLOW_EXECUTION_STARTED", "WORKFLOW_EXECUTION_TERMINATED"]
    assert d.current_key("w1") == second and d.run(second)["deadlines"] == {}
    assert not d.run_until(AT_10 + 60 * M)


def test_the_execution_timeout_ends_the_chain(d):
    # The chain may run 25 minutes (until 00:29): runs at 00:10 and 00:20, then it times out.
    _, second = first_run_answered(d, [complete("1")], workflow_execution_timeout_ms=25 * M)
    d.run_until(AT_10 + 10 * M)
    d.complete(second, [complete("2")])
    third = next_run(d, second)
    d.run_until(T0 + 25 * M)
    closed = d.check(third)[-1]
    assert closed["event_type"] == "WORKFLOW_EXECUTION_TIMED_OUT"
    assert closed["attributes"] == {"retry_state": "TIMEOUT", "new_execution_run_id": ""}
    assert d.current_key("w1") == third and d.types(third)[1:] == ["WORKFLOW_EXECUTION_TIMED_OUT"]


def test_every_is_relative_to_the_previous_scheduled_time(d):
    key, _ = d.start(cron_schedule="@every 90s")
    assert started(d, key)["first_workflow_task_backoff_ms"] == 90 * S
    d.run_until(T0 + 90 * S + 250)  # the run closes 250 ms after its time
    d.complete(key, [complete("1")])
    second = next_run(d, key)
    # Next time T0 + 180 s, 89.75 s away: the backoff is rounded up to 90 s, as Temporal does.
    assert started(d, second)["first_workflow_task_backoff_ms"] == 90 * S
    assert d.run(second)["execution_time_ms"] == T0 + 180 * S + 250


def test_plain_runs_store_no_cron_fields(d):
    key, _ = d.start()
    assert "cron_schedule" not in d.run(key) and "cron_schedule" not in started(d, key)
    assert started(d, key)["initiator"] == "UNSPECIFIED"


def test_an_invalid_cron_schedule_is_rejected_with_temporals_reason(d):
    for cron, reason in (("0 0 * * 7", INVALID_CRON_SCHEDULE), ("0 0 1 1 * 2027", INVALID_CRON_SCHEDULE),
                         ("0 0 31 2 *", NO_TIME_CAN_BE_FOUND)):
        events, (reply,) = d.send("START", request_id=f"r-{cron}", workflow_id="w1", workflow_type="Report",
                                  task_queue="reports", cron_schedule=cron)
        assert (reply.rejection_type, reply.rejection_reason) == ("INVALID_ARGUMENT", reason)
        assert reply.request_id == f"r-{cron}"
        (rejection,) = rejections(events)
        assert rejection.rejection_reason == reason
    assert d.current_key("w1") is None and d.workflow_tasks() == []


def _cron_child(cron: str) -> dict:
    return {"type": "START_CHILD_WORKFLOW_EXECUTION", "workflow_id": "child-1", "workflow_type": "Report",
            "task_queue": "", "input": "[]", "cron_schedule": cron}


def test_a_child_can_be_a_cron_workflow_and_its_parent_hears_when_the_chain_ends(d):
    parent, _ = d.start()
    d.complete(parent, [_cron_child(EVERY_10_MIN)])
    assert d.history(parent)[-1]["attributes"]["cron_schedule"] == EVERY_10_MIN
    d.pump()
    child = d.current_key("child-1")
    assert (started(d, child)["cron_schedule"], started(d, child)["initiator"]) == (EVERY_10_MIN, "CRON_SCHEDULE")
    d.complete(parent, [])
    d.run_until(AT_10)
    d.complete(child, [complete("1")])
    d.pump()
    assert "CHILD_WORKFLOW_EXECUTION_COMPLETED" not in d.types(parent)  # a cron run follows
    _, (reply,) = d.send("TERMINATE", workflow_id="child-1", reason="enough")
    d.pump()
    assert d.types(parent)[-2:] == ["CHILD_WORKFLOW_EXECUTION_TERMINATED", "WORKFLOW_TASK_SCHEDULED"]


def test_a_child_with_an_invalid_cron_schedule_fails_the_parents_task(d):
    parent, _ = d.start()
    d.complete(parent, [_cron_child("0 0 * * 7")])
    (failed,) = [e["attributes"] for e in d.history(parent) if e["event_type"] == "WORKFLOW_TASK_FAILED"]
    assert failed["cause"] == "BAD_START_CHILD_EXECUTION_ATTRIBUTES"
    # The text of a Temporal 1.32 server, without its "BadStartChildExecutionAttributes: " prefix
    # and " WorkflowId=..." suffix, like the engine's other command failures.
    assert failed["failure"]["message"] == f"invalid CronSchedule on StartChildWorkflowExecutionCommand: {INVALID_CRON_SCHEDULE}"
