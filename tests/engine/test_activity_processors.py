"""Activity processors with a manual clock: the four timeouts, retries, heartbeats, cancel.

Each test drives the partition processor like the engine does (commands in, the
checker's TIME_OUT/DISPATCH commands at the times it would write them) and checks the
events against SEMANTICS.md sections 1, 2 and 13.
"""

from __future__ import annotations

import pytest

from streamproc.clock import ManualClock
from streamproc.protocol.records import Record, RecordType
from tests.engine.harness import Harness

S = 1000  # ms


@pytest.fixture
def h(tmp_path):
    harness = Harness(tmp_path / "acts", clock=ManualClock(start_ms=1_000_000))
    yield harness
    harness.close()


def cmd(intent, key=-1, **value):
    return Record.command("ACTIVITY_TASK", intent, value, key=key)


def schedule(h, activity_id="a1", retry_policy=None, **timeouts_ms):
    value = {"activity_id": activity_id, "activity_type": "charge", "task_queue": "payments",
             "input": '[{"amount": 5}]', "retry_policy": retry_policy, **timeouts_ms}
    (ev,) = h.send(cmd("SCHEDULE", **value))
    assert ev.intent == "ActivityTaskScheduled", ev.rejection_reason
    return ev


def start(h, key, attempt):
    assert h.send(cmd("START", key, attempt=attempt, identity=f"worker-{attempt}")) == []


def fail(h, key, attempt, type_="Boom", non_retryable=False, next_retry_delay_ms=-1):
    failure = {"message": f"failed attempt {attempt}", "kind": "APPLICATION", "type": type_,
               "non_retryable": non_retryable, "next_retry_delay_ms": next_retry_delay_ms}
    return h.send(cmd("FAIL", key, attempt=attempt, failure=failure))


def run_until(h, until_ms):
    """Advance the clock millisecond-exactly to each due time up to `until_ms`, like the checker."""
    produced = []
    while True:
        wait = h.checker.wait_ms(h.clock.now_ms())
        if wait is None or h.clock.now_ms() + wait > until_ms:
            break
        h.clock.advance(wait)
        produced += [e for e in h.check_due() if e.record_type is RecordType.EVENT]
    h.clock.set(until_ms)
    return produced


def dispatched_attempts(h):
    return [(t.value["attempt"], t.timestamp_ms) for _, t in h.tasks if t.value_type == "ACTIVITY_TASK"]


def test_schedule_records_normalised_timeouts_and_default_policy(h):
    ev = schedule(h, schedule_to_close_timeout_ms=60 * S)
    v = ev.value
    assert (v["schedule_to_close_timeout_ms"], v["schedule_to_start_timeout_ms"],
            v["start_to_close_timeout_ms"], v["heartbeat_timeout_ms"]) == (60 * S, 60 * S, 60 * S, 0)
    assert v["retry_policy"] == {"initial_interval_ms": 1000, "backoff_coefficient": 2.0,
                                 "maximum_interval_ms": 100_000, "maximum_attempts": 0,
                                 "non_retryable_error_types": []}
    assert ev.value["event_id"] == 1 and dispatched_attempts(h) == [(1, 1_000_000)]


@pytest.mark.parametrize("value, message", [
    ({}, "a valid StartToCloseTimeout or ScheduleToCloseTimeout must be set on the activity. "
         "ActivityId=a1 ActivityType=charge"),
    ({"schedule_to_close_timeout_ms": -1000, "start_to_close_timeout_ms": 10},
     "invalid ScheduleToCloseTimeout: negative duration"),
    ({"start_to_close_timeout_ms": 10, "retry_policy": {"maximum_attempts": -1}},
     "MaximumAttempts cannot be negative on retry policy."),
    ({"start_to_close_timeout_ms": 10, "retry_policy": {"backoff_coefficient": 0.5}},
     "BackoffCoefficient cannot be less than 1 on retry policy."),
])
def test_invalid_schedule_is_rejected_with_the_documented_message(h, value, message):
    base = {"activity_id": "a1", "activity_type": "charge", "task_queue": "q", "input": "null",
            "retry_policy": None}
    (ev,) = h.send(cmd("SCHEDULE", **{**base, **value}))
    assert ev.record_type is RecordType.COMMAND_REJECTION and ev.rejection_type == "INVALID_ARGUMENT"
    assert ev.rejection_reason.startswith(message)


@pytest.mark.parametrize("field", ["schedule_to_close_timeout_ms", "schedule_to_start_timeout_ms",
                                   "start_to_close_timeout_ms", "heartbeat_timeout_ms"])
def test_an_int64_timeout_is_capped_at_100_years_and_int64_min_refused_as_negative(h, field):
    hundred_years_ms = 100 * 365 * 86400 * S
    ev = schedule(h, activity_id=f"big-{field}", **{"start_to_close_timeout_ms": S, field: 2**63 - 1},
                  retry_policy={"initial_interval_ms": 2**63 - 1, "maximum_interval_ms": 2**63 - 1})
    # normalised as any timeout is (a heartbeat timeout no longer than start-to-close ...)
    assert 0 < ev.value[field] <= hundred_years_ms
    assert ev.value["schedule_to_close_timeout_ms"] == (hundred_years_ms if field == "schedule_to_close_timeout_ms"
                                                        else 0)
    base = {"activity_id": f"neg-{field}", "activity_type": "charge", "task_queue": "q", "input": "null",
            "retry_policy": None, "start_to_close_timeout_ms": S}
    (rej,) = h.send(cmd("SCHEDULE", **{**base, field: -(2**63)}))
    assert rej.rejection_type == "INVALID_ARGUMENT" and "negative duration" in rej.rejection_reason


def send_json(h, value):
    import orjson

    body = {"value_type": "ACTIVITY_TASK", "intent": "SCHEDULE", "activity_task": value}
    return h.send(orjson.dumps(body), headers=[("content-type", b"application/json")])


def test_swf_none_and_seconds_strings_are_accepted_in_json_commands(h):
    base = {"activity_id": "swf", "activity_type": "charge", "task_queue": "q", "input": "null"}
    (ev,) = send_json(h, {**base, "schedule_to_close_timeout_ms": "NONE", "start_to_close_timeout_ms": "30"})
    assert ev.intent == "ActivityTaskScheduled"
    assert ev.value["start_to_close_timeout_ms"] == 30 * S and ev.value["schedule_to_close_timeout_ms"] == 0
    (rej,) = send_json(h, {**base, "activity_id": "x", "start_to_close_timeout_ms": "soon"})
    assert rej.rejection_type == "UNDECODABLE" and "soon" in rej.rejection_reason
    (rej,) = send_json(h, {**base, "activity_id": "y", "start_to_close_timeout_ms": [1]})
    assert rej.rejection_type == "UNDECODABLE" and "does not match schema" in rej.rejection_reason


def test_an_open_activity_id_cannot_be_scheduled_twice(h):
    schedule(h, start_to_close_timeout_ms=S)
    (ev,) = h.send(cmd("SCHEDULE", activity_id="a1", activity_type="x", task_queue="q", input="1",
                       start_to_close_timeout_ms=S, retry_policy=None))
    assert ev.rejection_type == "ALREADY_EXISTS"


def test_completion_writes_started_then_completed(h):
    key = schedule(h, start_to_close_timeout_ms=10 * S).key
    start(h, key, 1)
    started, completed = h.send(cmd("COMPLETE", key, attempt=1, result='{"ok": true}'))
    assert (started.intent, started.value["attempt"], started.value["event_id"]) == ("ActivityTaskStarted", 1, 2)
    assert started.value["last_failure"] is None and started.value["identity"] == "worker-1"
    assert completed.intent == "ActivityTaskCompleted" and completed.value["result"] == '{"ok": true}'
    assert (completed.value["scheduled_event_id"], completed.value["started_event_id"]) == (1, 2)
    assert h.checker.next_fire_ms is None


def test_retries_wait_1_2_4_4_seconds_then_maximum_attempts(h):
    """Section 13: initial 1 s, coefficient 2, maximum interval 4 s, 5 attempts."""
    policy = {"initial_interval_ms": S, "backoff_coefficient": 2.0, "maximum_interval_ms": 4 * S,
              "maximum_attempts": 5}
    key = schedule(h, retry_policy=policy, start_to_close_timeout_ms=60 * S).key
    starts = []
    for attempt in range(1, 6):
        assert dispatched_attempts(h)[-1][0] == attempt
        starts.append(h.clock.now_ms())
        start(h, key, attempt)
        events = fail(h, key, attempt)
        if attempt < 5:
            assert events == []                      # retried attempts leave no events
            dispatched_due(h, attempt + 1)
    assert [b - a for a, b in zip(starts, starts[1:])] == [1000, 2000, 4000, 4000]  # a timer fires at its time
    started, failed = events
    assert started.value["attempt"] == 5 and started.value["last_failure"]["message"] == "failed attempt 4"
    assert failed.intent == "ActivityTaskFailed" and failed.value["retry_state"] == "MAXIMUM_ATTEMPTS_REACHED"
    assert failed.value["failure"]["type"] == "Boom"


def test_maximum_attempts_1_never_retries(h):
    key = schedule(h, retry_policy={"maximum_attempts": 1}, start_to_close_timeout_ms=S).key
    start(h, key, 1)
    _, failed = fail(h, key, 1)
    assert failed.value["retry_state"] == "MAXIMUM_ATTEMPTS_REACHED"


def test_non_retryable_by_flag_and_by_type(h):
    key = schedule(h, retry_policy={"non_retryable_error_types": ["ValidationError"]},
                   start_to_close_timeout_ms=S).key
    start(h, key, 1)
    _, failed = fail(h, key, 1, type_="ValidationError")
    assert failed.value["retry_state"] == "NON_RETRYABLE_FAILURE"
    key = schedule(h, activity_id="a2", start_to_close_timeout_ms=S).key
    start(h, key, 1)
    _, failed = fail(h, key, 1, non_retryable=True)
    assert failed.value["retry_state"] == "NON_RETRYABLE_FAILURE"


def test_next_retry_delay_may_exceed_the_maximum_interval(h):
    key = schedule(h, retry_policy={"maximum_interval_ms": 2 * S}, start_to_close_timeout_ms=600 * S).key
    start(h, key, 1)
    t_fail = h.clock.now_ms()
    fail(h, key, 1, next_retry_delay_ms=7 * 60 * S)
    run_until(h, t_fail + 8 * 60 * S)
    assert dispatched_attempts(h)[-1] == (2, t_fail + 7 * 60 * S)


def test_start_to_close_timeout_then_success_carries_the_timeout_as_last_failure(h):
    """Section 13: StC 1 s, retry initial 1 s: attempt 2 starts 2 s after attempt 1."""
    key = schedule(h, start_to_close_timeout_ms=S, retry_policy={"initial_interval_ms": S}).key
    t0 = h.clock.now_ms()
    start(h, key, 1)
    dispatched_due(h, 2)
    attempt, dispatched_at = dispatched_attempts(h)[-1]
    # the backoff counts from the deadline; the dispatch timer fires 1 ms after its due time
    assert attempt == 2 and dispatched_at - t0 == 2000
    start(h, key, 2)
    started, _ = h.send(cmd("COMPLETE", key, attempt=2, result="1"))
    assert started.value["attempt"] == 2
    assert started.value["last_failure"]["message"] == "activity StartToClose timeout"
    assert started.value["last_failure"]["timeout_type"] == "START_TO_CLOSE"


def test_late_completion_of_a_timed_out_attempt_is_rejected(h):
    key = schedule(h, start_to_close_timeout_ms=S).key
    start(h, key, 1)
    run_until(h, h.clock.now_ms() + 1500)
    (rej,) = h.send(cmd("COMPLETE", key, attempt=1, result="1"))
    assert rej.record_type is RecordType.COMMAND_REJECTION and rej.rejection_type == "INVALID_STATE"
    assert "that attempt is over: the activity is at attempt 2" in rej.rejection_reason
    (rej,) = h.send(cmd("HEARTBEAT", key, attempt=1, details=None))
    assert "that attempt is over" in rej.rejection_reason


def test_av1_schedule_to_close_fires_during_attempt_5(h):
    t0 = h.clock.now_ms()
    key = schedule(h, schedule_to_close_timeout_ms=60 * S, start_to_close_timeout_ms=10 * S).key
    events = []
    for attempt in range(1, 6):
        attempt_now, at = dispatched_attempts(h)[-1]
        assert attempt_now == attempt
        h.clock.set(max(h.clock.now_ms(), at))
        start(h, key, attempt)
        events = run_until(h, t0 + 70 * S) if attempt == 5 else dispatched_due(h, attempt + 1)
    starts = [a for a in h.events if a.intent == "ActivityTaskStarted"]
    started, timed_out = events
    assert started.value["attempt"] == 5 and starts == [started]
    assert started.value["last_failure"]["timeout_type"] == "START_TO_CLOSE"
    f = timed_out.value["failure"]
    assert timed_out.intent == "ActivityTaskTimedOut" and timed_out.value["retry_state"] == "TIMEOUT"
    assert f["timeout_type"] == "SCHEDULE_TO_CLOSE"
    assert f["message"] == ("Not enough time to schedule next retry before activity ScheduleToClose "
                            "timeout, giving up retrying")
    assert f["cause"]["message"] == "activity StartToClose timeout"
    assert timed_out.timestamp_ms == t0 + 60 * S


def dispatched_due(h, attempt):
    """Step the clock from due time to due time until attempt `attempt` is dispatched."""
    while dispatched_attempts(h)[-1][0] < attempt:
        h.clock.advance(h.checker.wait_ms(h.clock.now_ms()))
        h.check_due()
    return []


def test_av4_heartbeats_move_the_deadline_lazily_then_it_fires(h):
    key = schedule(h, start_to_close_timeout_ms=10 * S, heartbeat_timeout_ms=3 * S,
                   retry_policy={"maximum_attempts": 1}).key
    t = h.clock.now_ms()
    start(h, key, 1)
    for at in (2 * S, 4 * S):
        h.clock.set(t + at)
        assert h.send(cmd("HEARTBEAT", key, attempt=1, details=f'{{"progress": {at}}}')) == []
    fired = run_until(h, t + 9 * S)
    started, timed_out = fired
    assert timed_out.timestamp_ms == t + 7 * S           # last heartbeat at T+4 + 3 s
    assert timed_out.value["failure"]["timeout_type"] == "HEARTBEAT"
    assert timed_out.value["failure"]["details"] == '{"progress":4000}'
    assert timed_out.value["retry_state"] == "MAXIMUM_ATTEMPTS_REACHED"
    rearmed = [r for r in h.events if r.record_type is RecordType.COMMAND_REJECTION]
    assert len(rearmed) == 1 and "deadline of activity" in rearmed[0].rejection_reason


def test_av5_schedule_to_start_is_not_retried(h):
    t0 = h.clock.now_ms()
    key = schedule(h, schedule_to_start_timeout_ms=5 * S, start_to_close_timeout_ms=10 * S).key
    (timed_out,) = run_until(h, t0 + 10 * S)
    assert timed_out.key == key and timed_out.timestamp_ms == t0 + 5 * S
    assert timed_out.value["failure"]["timeout_type"] == "SCHEDULE_TO_START"
    assert timed_out.value["failure"]["message"] == "activity ScheduleToStart timeout"
    assert timed_out.value["retry_state"] == "TIMEOUT" and timed_out.value["started_event_id"] == 0


def test_av6_start_to_close_with_two_attempts(h):
    key = schedule(h, start_to_close_timeout_ms=10 * S, retry_policy={"maximum_attempts": 2}).key
    start(h, key, 1)
    run_until(h, h.clock.now_ms() + 10 * S + 1001 + 1)
    start(h, key, 2)
    started, timed_out = run_until(h, h.clock.now_ms() + 11 * S)
    assert timed_out.value["failure"]["timeout_type"] == "START_TO_CLOSE"
    assert timed_out.value["failure"]["message"] == "activity StartToClose timeout"
    assert timed_out.value["retry_state"] == "MAXIMUM_ATTEMPTS_REACHED" and started.value["attempt"] == 2


def test_schedule_to_close_gives_up_at_failure_time_when_the_backoff_would_pass_it(h):
    t0 = h.clock.now_ms()
    key = schedule(h, schedule_to_close_timeout_ms=3 * S, start_to_close_timeout_ms=3 * S,
                   retry_policy={"initial_interval_ms": 2 * S}).key
    h.clock.set(t0 + 1500)
    start(h, key, 1)
    _, failed = fail(h, key, 1)                          # 1.5 s + 2 s > 3 s: no retry
    assert failed.intent == "ActivityTaskFailed" and failed.value["retry_state"] == "TIMEOUT"
    assert failed.timestamp_ms == t0 + 1500


def test_cancel_before_start_closes_at_once(h):
    key = schedule(h, start_to_close_timeout_ms=S).key
    requested, canceled = h.send(cmd("REQUEST_CANCEL", key))
    assert requested.intent == "ActivityTaskCancelRequested" and requested.value["event_id"] == 2
    assert canceled.intent == "ActivityTaskCanceled" and canceled.value["details"] == '"ACTIVITY_ID_NOT_STARTED"'
    assert canceled.value["latest_cancel_requested_event_id"] == 2


def test_cancel_of_a_running_activity_is_learned_on_heartbeat_and_not_retried(h):
    key = schedule(h, start_to_close_timeout_ms=10 * S).key
    start(h, key, 1)
    (requested,) = h.send(cmd("REQUEST_CANCEL", key))
    assert requested.intent == "ActivityTaskCancelRequested"
    h.send(cmd("HEARTBEAT", key, attempt=1, details=None))
    started, failed = fail(h, key, 1)                    # a failure after a cancel request
    assert failed.value["retry_state"] == "CANCEL_REQUESTED"


def test_report_canceled_closes_a_started_activity(h):
    key = schedule(h, start_to_close_timeout_ms=10 * S).key
    start(h, key, 1)
    h.send(cmd("REQUEST_CANCEL", key))
    started, canceled = h.send(cmd("REPORT_CANCELED", key, attempt=1, details='"stopped"'))
    assert (started.value["event_id"], canceled.value["event_id"]) == (3, 4)
    assert canceled.value["details"] == '"stopped"' and canceled.value["started_event_id"] == 3


def test_start_is_refused_for_a_wrong_attempt_or_twice(h):
    key = schedule(h, start_to_close_timeout_ms=S).key
    (rej,) = h.send(cmd("START", key, attempt=2, identity="w"))
    assert "that attempt is over" in rej.rejection_reason
    start(h, key, 1)
    (rej,) = h.send(cmd("START", key, attempt=1, identity="w"))
    assert "already started" in rej.rejection_reason


def test_a_start_sent_again_with_its_request_id_is_answered_again(h):
    """A worker that got no answer resends its START: the copy is told the start is its
    own (ATTEMPT_STARTED again, same start time); another START is still refused."""
    key = schedule(h, start_to_close_timeout_ms=S).key
    first = Record.command("ACTIVITY_TASK", "START", {"attempt": 1, "identity": "w"}, key=key,
                           request_id="s-1", reply_partition=1)
    assert h.send(first) == []
    h.clock.advance(500)
    assert h.send(first) == []
    answers = [r for _, r in h.replies]
    assert [r.intent for r in answers] == ["ATTEMPT_STARTED", "ATTEMPT_STARTED"]
    assert answers[0].value["started_time_ms"] == answers[1].value["started_time_ms"]
    other = Record.command("ACTIVITY_TASK", "START", {"attempt": 1, "identity": "w"}, key=key, request_id="s-2")
    (rej,) = h.send(other)
    assert "already started" in rej.rejection_reason


def test_a_timeout_before_the_timer_is_due_is_rejected_and_at_its_time_accepted(h):
    """Activities follow Temporal: a timer fires at its time (jobs keep Zeebe's strict rule, Z1)."""
    key = schedule(h, start_to_close_timeout_ms=10 * S, retry_policy={"maximum_attempts": 1}).key
    start(h, key, 1)
    due = h.clock.now_ms() + 10 * S
    h.clock.set(due - 1)
    (early,) = h.send(cmd("TIME_OUT", key, timer_due_ms=due, timeout_type="START_TO_CLOSE", attempt=1))
    assert early.record_type is RecordType.COMMAND_REJECTION and "it is not due yet" in early.rejection_reason
    h.clock.set(due)
    events = h.send(cmd("TIME_OUT", key, timer_due_ms=due, timeout_type="START_TO_CLOSE", attempt=1))
    assert [e.intent for e in events][-1] == "ActivityTaskTimedOut"
