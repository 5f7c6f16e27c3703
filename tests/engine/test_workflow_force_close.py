"""A run closed from outside while a workflow task is out (SEMANTICS.md 3.3, 6.2).

Terminate and the execution and run timeouts close the run under a task that was
dispatched and not answered. That task counts as started: WORKFLOW_TASK_STARTED and
WORKFLOW_TASK_FAILED(FORCE_CLOSE_COMMAND) are written before the close event, buffered
events after them, and the worker's late answer is rejected. A transient attempt leaves
nothing, as Temporal's does.
"""

from __future__ import annotations


from streamproc.protocol.records import Record
from streamproc.semantics.workflow_ids import HISTORY_SERVICE_IDENTITY
from streamproc.workflow.replayer import Replayer
from tests.engine.workflow_driver import S, WorkflowDriver, attrs, rejections
from tests.support.crash_workflows import ThreeStepsAndATimer

T0 = 1_000_000
TIMER = {"type": "START_TIMER", "timer_id": "1", "start_to_fire_timeout_ms": 20 * S}
ACTIVITY = {"type": "SCHEDULE_ACTIVITY_TASK", "activity_id": "2", "activity_type": "reserve",
            "task_queue": "", "input": "[]", "start_to_close_timeout_ms": 10 * S}
FORCE_CLOSED = ["WORKFLOW_TASK_SCHEDULED", "WORKFLOW_TASK_STARTED", "WORKFLOW_TASK_FAILED"]


DRIVER_OPTIONS = {"start_ms": T0}


def _force_closed_task(events: list[dict], scheduled_event_id: int) -> dict:
    """The FORCE_CLOSE_COMMAND failure of the task scheduled at `scheduled_event_id`."""
    (failed,) = attrs(events, "WORKFLOW_TASK_FAILED")
    started_id = scheduled_event_id + 1
    assert events[started_id - 1]["event_type"] == "WORKFLOW_TASK_STARTED"
    assert events[started_id - 1]["attributes"]["scheduled_event_id"] == scheduled_event_id
    assert failed == {"scheduled_event_id": scheduled_event_id, "started_event_id": started_id,
                      "cause": "FORCE_CLOSE_COMMAND", "failure": None, "identity": HISTORY_SERVICE_IDENTITY}
    return failed


def _late_answer_is_rejected(d: WorkflowDriver, key: int, scheduled_event_id: int) -> None:
    history_before = d.history(key)
    (rejection,) = rejections(d.complete(key, [ACTIVITY], scheduled_event_id=scheduled_event_id))
    assert rejection.rejection_type == "INVALID_STATE"
    assert "workflow execution already completed" in rejection.rejection_reason
    assert d.history(key) == history_before and d.activity_tasks() == []


def test_terminate_while_the_first_task_is_out_fails_it_with_force_close(d):
    key, _ = d.start()
    _, (reply,) = d.send("TERMINATE", workflow_id="w1", run_id="", reason="stop", identity="ops")
    assert reply.intent == "WORKFLOW_EXECUTION_TERMINATED"
    events = d.check(key)
    assert [e["event_type"] for e in events] == [
        "WORKFLOW_EXECUTION_STARTED", *FORCE_CLOSED, "WORKFLOW_EXECUTION_TERMINATED"]
    _force_closed_task(events, 2)
    assert events[-1]["attributes"] == {"reason": "stop", "details": None, "identity": "ops"}
    assert d.run(key)["task"] is None and d.run(key)["deadlines"] == {}
    _late_answer_is_rejected(d, key, 2)
    assert d.run_until(T0 + 3600 * S) == []  # the task's timeout was disarmed too


def test_events_buffered_under_the_task_follow_its_failure(d):
    key, _ = d.start()
    d.complete(key, [{**TIMER, "start_to_fire_timeout_ms": S},
                     {**TIMER, "timer_id": "3", "start_to_fire_timeout_ms": 3 * S}])
    d.run_until(T0 + 2 * S)  # timer 1 fires: task 2 goes out
    scheduled = d.task(key)["scheduled_event_id"]
    d.run_until(T0 + 4 * S)  # timer 3 fires while task 2 is out: buffered
    d.send("TERMINATE", workflow_id="w1", run_id="", reason="stop", identity="ops")
    events = d.check(key)
    assert [e["event_type"] for e in events][-5:] == [
        *FORCE_CLOSED, "TIMER_FIRED", "WORKFLOW_EXECUTION_TERMINATED"]
    _force_closed_task(events, scheduled)
    assert events[-2]["attributes"]["timer_id"] == "3"


def test_execution_timeout_while_a_task_is_out_fails_it_first(d):
    key, _ = d.start(workflow_execution_timeout_ms=30 * S)
    d.complete(key, [TIMER])
    d.run_until(T0 + 21 * S)  # the timer fires: a task goes out, its timeout past the deadline
    scheduled = d.task(key)["scheduled_event_id"]
    d.run_until(T0 + 31 * S)
    events = d.check(key)
    assert [e["event_type"] for e in events][-4:] == [*FORCE_CLOSED, "WORKFLOW_EXECUTION_TIMED_OUT"]
    _force_closed_task(events, scheduled)
    assert events[-1]["attributes"] == {"retry_state": "TIMEOUT", "new_execution_run_id": ""}
    assert d.run(key)["status"] == "TIMED_OUT"
    _late_answer_is_rejected(d, key, scheduled)


def test_run_timeout_while_a_task_is_out_fails_it_and_the_retry_run_starts_clean(d):
    key, _ = d.start(workflow_run_timeout_ms=30 * S, retry_policy={"initial_interval_ms": S,
                                                                     "maximum_attempts": 2})
    d.complete(key, [TIMER])
    d.run_until(T0 + 21 * S)
    scheduled = d.task(key)["scheduled_event_id"]
    d.run_until(T0 + 31 * S)
    events = d.check(key)
    assert [e["event_type"] for e in events][-4:] == [*FORCE_CLOSED, "WORKFLOW_EXECUTION_TIMED_OUT"]
    _force_closed_task(events, scheduled)
    closed = events[-1]["attributes"]
    assert closed["retry_state"] == "IN_PROGRESS" and closed["new_execution_run_id"]
    retry_key = d.current_key("w1")
    d.run_until(T0 + 33 * S)  # its backoff is over: its first task
    assert d.types(retry_key) == ["WORKFLOW_EXECUTION_STARTED", "WORKFLOW_TASK_SCHEDULED"]
    _late_answer_is_rejected(d, key, scheduled)


def test_a_transient_attempt_out_at_the_timeout_leaves_no_task_events(d):
    key, _ = d.start(workflow_execution_timeout_ms=30 * S)
    d.fail_task(key)  # attempt 2 goes out, transient
    assert d.task(key)["transient"]
    d.run_until(T0 + 31 * S)
    events = d.check(key)
    assert [e["event_type"] for e in events] == [
        "WORKFLOW_EXECUTION_STARTED", "WORKFLOW_TASK_SCHEDULED", "WORKFLOW_TASK_STARTED", "WORKFLOW_TASK_FAILED",
        "WORKFLOW_EXECUTION_TIMED_OUT"]
    assert attrs(events, "WORKFLOW_TASK_FAILED")[0]["cause"] == "WORKFLOW_WORKER_UNHANDLED_FAILURE"


def test_a_run_closed_with_no_task_out_writes_only_its_close_event(d):
    key, _ = d.start()
    d.complete(key, [TIMER])
    d.send("TERMINATE", workflow_id="w1", run_id="", reason="stop", identity="ops")
    assert d.types(key)[-2:] == ["TIMER_STARTED", "WORKFLOW_EXECUTION_TERMINATED"]
    d.check(key)


def test_terminate_if_running_force_closes_the_old_runs_task(d):
    old_key, _ = d.start()
    d.start(id_reuse_policy="TERMINATE_IF_RUNNING")
    events = d.check(old_key)
    assert [e["event_type"] for e in events][1:] == [*FORCE_CLOSED, "WORKFLOW_EXECUTION_TERMINATED"]
    _force_closed_task(events, 2)


def test_the_sdk_replays_a_force_closed_history(d):
    """The worker side reads the sequence too: the Replayer goes through it without error."""
    key, _ = d.start(workflow_type="ThreeStepsAndATimer", input='["w1"]')
    replayer = Replayer(workflows=[ThreeStepsAndATimer])
    d.complete(key, replayer.replay(d.history(key)).commands)  # the first step is scheduled
    (step,) = d.activity_tasks()
    d.h.send(Record.command("ACTIVITY_TASK", "START", {"attempt": 1, "identity": "w"}, key=step.key))
    d.h.send(Record.command("ACTIVITY_TASK", "COMPLETE", {"attempt": 1, "result": '"w1>1"'}, key=step.key))
    d.send("TERMINATE", workflow_id="w1", run_id="", reason="stop", identity="ops")  # task 2 is out
    events = d.check(key)
    assert [e["event_type"] for e in events][-4:] == [*FORCE_CLOSED, "WORKFLOW_EXECUTION_TERMINATED"]
    assert replayer.replay(events).error is None
