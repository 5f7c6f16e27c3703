"""Which due dates mark work in progress (`streamproc.due.waiting`): what the time-skipping
test environment reads before it moves its clock, walked through a run on one partition."""

from __future__ import annotations

from streamproc.due.waiting import busy
from streamproc.protocol.records import Record
from tests.engine.workflow_driver import S

DAY = 24 * 3600 * S
TIMER = {"type": "START_TIMER", "timer_id": "t", "start_to_fire_timeout_ms": 30 * DAY}
ACTIVITY = {"type": "SCHEDULE_ACTIVITY_TASK", "activity_id": "1", "activity_type": "charge", "task_queue": "",
            "input": "[25]", "start_to_close_timeout_ms": 10 * S,
            "retry_policy": {"initial_interval_ms": DAY, "backoff_coefficient": 1.0, "maximum_attempts": 3}}


def activity(d, intent, key, **value):
    return d.h.send(Record.command("ACTIVITY_TASK", intent, value, key=key))


def test_a_task_out_or_an_attempt_out_is_work_in_progress_a_timer_or_a_backoff_is_a_wait(d):
    key, _ = d.start()
    assert busy(d.h.db)  # the first workflow task is out
    d.complete(key, [TIMER])
    assert not busy(d.h.db)
    assert d.h.checker.next_fire_ms == d.clock.now_ms() + 30 * DAY

    d.clock.advance(30 * DAY)
    d.h.check_due()  # the timer fires: a workflow task is out again
    assert busy(d.h.db)
    d.complete(key, [ACTIVITY])
    assert busy(d.h.db)  # dispatched, not started
    (task,) = d.activity_tasks()
    activity(d, "START", task.key, attempt=1, identity="act-worker")
    assert busy(d.h.db)  # running
    activity(d, "FAIL", task.key, attempt=1, failure={
        "message": "declined", "kind": "APPLICATION", "type": "Declined", "non_retryable": False,
        "next_retry_delay_ms": -1})
    assert not busy(d.h.db)  # waiting out a day of backoff
    assert d.h.checker.next_fire_ms == d.clock.now_ms() + DAY


def test_a_job_on_its_queue_or_started_is_work_in_progress_one_in_backoff_is_a_wait(d):
    h = d.h
    h.send(Record.command("JOB", "CREATE", {"type": "payments", "payload": "{}", "retries": 3, "timeout_ms": 10 * S},
                          request_id="r1"))
    assert busy(h.db)  # on its task queue
    (task,) = [t for _, t in h.tasks if t.value_type == "JOB"]
    h.send(Record.command("JOB", "START", {"attempt": 1, "worker": "w"}, key=task.key))
    assert busy(h.db)
    h.send(Record.command("JOB", "FAIL", {"attempt": 1, "retries": 2, "error_message": "no",
                                          "retry_backoff_ms": DAY}, key=task.key))
    assert not busy(h.db)
    assert h.checker.next_fire_ms == d.clock.now_ms() + DAY + 1  # a job's backoff ends strictly after


def test_an_empty_partition_is_not_busy_and_has_nothing_due(d):
    assert not busy(d.h.db)
    assert d.h.checker.next_fire_ms is None
