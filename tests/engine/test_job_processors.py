"""Every job intent and every rejection, through the partition processor with a manual clock."""

from __future__ import annotations

import pytest

from streamproc.clock import ManualClock
from streamproc.protocol.codec import JSON_CONTENT_TYPE
from streamproc.protocol.partitioning import partition_of_key
from streamproc.protocol.records import Record, RecordType
from tests.engine.harness import Harness


@pytest.fixture
def h(tmp_path):
    harness = Harness(tmp_path / "p3", partition=3)
    yield harness
    harness.close()


def job_cmd(intent, key=-1, **value):
    return Record.command("JOB", intent, value, key=key, request_id="req-1")


def create(h, **kw):
    value = {"type": "payments", "payload": '{"amount": 5}', "retries": 3, "timeout_ms": 1000}
    value.update(kw)
    (created,) = h.send(job_cmd("CREATE", **value))
    assert created.intent == "CREATED", created.rejection_reason
    return created


def started(h, key, attempt=1, worker="w1"):
    (ev,) = h.send(job_cmd("START", key, attempt=attempt, worker=worker))
    assert ev.intent == "STARTED" and ev.record_type is RecordType.EVENT, ev.rejection_reason
    return ev


def rejection(events):
    (ev,) = events
    assert ev.record_type is RecordType.COMMAND_REJECTION
    return ev


def test_create_assigns_a_key_on_the_partition_and_publishes_the_task(h):
    created = create(h)
    assert partition_of_key(created.key) == 3
    assert created.value["attempt"] == 1 and created.value["state"] == "ACTIVATABLE"
    assert created.request_id == "req-1"
    assert created.timestamp_ms == h.clock.now_ms()
    (queue, task), = h.tasks
    assert queue == "payments" and task.key == created.key and task.value["payload"] == '{"amount": 5}'
    second = create(h)
    assert second.key == created.key + 1


@pytest.mark.parametrize("value, reason", [
    ({"type": "bad queue!"}, "task queue must be"),
    ({"type": ""}, "task queue must be"),
    ({"payload": "{nope"}, "payload is not valid JSON"),
    ({"retries": -1}, "retries must be in [0, 1000000], got -1"),
    ({"timeout_ms": 0}, "timeout_ms must be in [1, "),
    ({"payload": '"' + "x" * 300_000 + '"'}, "more than the limit of 262144"),
])
def test_create_rejects_invalid_arguments(h, value, reason):
    base = {"type": "q", "payload": "{}", "retries": 3, "timeout_ms": 1000}
    ev = rejection(h.send(job_cmd("CREATE", **{**base, **value})))
    assert ev.rejection_type == "INVALID_ARGUMENT"
    assert reason in ev.rejection_reason
    assert h.tasks == []


def test_start_sets_the_deadline_from_the_timeout(h):
    key = create(h, timeout_ms=300_000).key
    ev = started(h, key)
    assert ev.value["deadline_ms"] == h.clock.now_ms() + 300_000
    assert ev.value["worker"] == "w1" and h.job(key)["state"] == "STARTED"


def test_start_rejections(h):
    ev = rejection(h.send(job_cmd("START", 12345, attempt=1, worker="w")))
    assert ev.rejection_type == "NOT_FOUND"
    assert ev.rejection_reason == "Expected to start job with key '12345', but no such job was found"
    key = create(h).key
    started(h, key)
    other_worker = Record.command("JOB", "START", {"attempt": 1, "worker": "w2"}, key=key, request_id="req-2")
    ev = rejection(h.send(other_worker))
    assert ev.rejection_type == "INVALID_STATE" and "it is STARTED, not ACTIVATABLE" in ev.rejection_reason
    ev = rejection(h.send(job_cmd("START", key, attempt=7, worker="w2")))
    assert "at attempt 7, but that attempt is over" in ev.rejection_reason


def test_a_start_sent_again_with_its_request_id_is_answered_again_without_an_event(h):
    """A worker that got no answer (broker outage, engine takeover) resends its START; the
    copy is told the start is its own, while another request for that attempt is refused."""
    key = create(h).key
    first = Record.command("JOB", "START", {"attempt": 1, "worker": "w1"}, key=key, request_id="s-1",
                           reply_partition=2)
    started_event, = h.send(first)
    assert started_event.intent == "STARTED"
    deadline = h.job(key)["deadline_ms"]
    h.clock.advance(100)
    assert h.send(first) == []  # no second STARTED event, no rejection
    (partition, answer), = h.replies[-1:]
    assert partition == 2 and answer.intent == "STARTED" and answer.key == key
    assert [r.intent for _, r in h.replies] == ["STARTED", "STARTED"]
    assert h.job(key)["deadline_ms"] == deadline and h.job(key)["state"] == "STARTED"
    other = Record.command("JOB", "START", {"attempt": 1, "worker": "w1"}, key=key, request_id="s-2")
    assert rejection(h.send(other)).rejection_type == "INVALID_STATE"


def test_complete_removes_the_job_and_its_deadline(h):
    key = create(h).key
    started(h, key)
    (ev,) = h.send(job_cmd("COMPLETE", key, attempt=1, result='{"ok": true}'))
    assert ev.intent == "COMPLETED" and ev.value["result"] == '{"ok": true}'
    assert h.job(key) is None
    assert h.checker.next_fire_ms is None
    ev = rejection(h.send(job_cmd("COMPLETE", key, attempt=1, result="{}")))
    assert ev.rejection_type == "NOT_FOUND"


def test_complete_needs_a_started_job_and_valid_json(h):
    key = create(h).key
    ev = rejection(h.send(job_cmd("COMPLETE", key, attempt=1, result="{}")))
    assert "it is ACTIVATABLE, not STARTED" in ev.rejection_reason
    started(h, key)
    ev = rejection(h.send(job_cmd("COMPLETE", key, attempt=1, result="{bad")))
    assert "result is not valid JSON" in ev.rejection_reason
    assert h.job(key)["state"] == "STARTED"


def test_timeout_vector_z1_strict_deadline_retries_unchanged(tmp_path):
    h = Harness(tmp_path / "z1", clock=ManualClock(start_ms=0))
    h.clock.set(1_000_000)
    key = create(h, timeout_ms=300_000).key
    started(h, key)
    h.clock.set(1_300_000)
    assert h.check_due() == []
    assert h.checker.wait_ms(h.clock.now_ms()) == 1
    h.clock.set(1_300_001)
    (ev,) = h.check_due()
    assert ev.intent == "TIMED_OUT" and ev.key == key and ev.value["deadline_ms"] == 1_300_000
    job = h.job(key)
    assert job["state"] == "ACTIVATABLE" and job["retries"] == 3 and job["attempt"] == 2
    assert [t.value["attempt"] for _, t in h.tasks] == [1, 2]
    h.close()


def test_stale_complete_after_timeout_is_rejected_and_new_attempt_completes(h):
    key = create(h, timeout_ms=1000).key
    started(h, key, worker="slow")
    h.clock.advance(1001)
    h.check_due()
    started(h, key, attempt=2, worker="fast")
    ev = rejection(h.send(job_cmd("COMPLETE", key, attempt=1, result="{}")))
    assert ev.rejection_type == "INVALID_STATE"
    assert "at attempt 1, but that attempt is over: the job is STARTED at attempt 2" in ev.rejection_reason
    (done,) = h.send(job_cmd("COMPLETE", key, attempt=2, result="1"))
    assert done.intent == "COMPLETED" and done.value["worker"] == "fast"


def test_duplicate_or_stale_time_out_is_rejected(h):
    key = create(h, timeout_ms=1000).key
    started(h, key)
    deadline = h.job(key)["deadline_ms"]
    ev = rejection(h.send(job_cmd("TIME_OUT", key, deadline_ms=deadline)))
    assert "that time has not passed" in ev.rejection_reason
    h.clock.advance(1001)
    (timed_out,) = h.send(job_cmd("TIME_OUT", key, deadline_ms=deadline))
    assert timed_out.intent == "TIMED_OUT"
    ev = rejection(h.send(job_cmd("TIME_OUT", key, deadline_ms=deadline)))
    assert ev.rejection_reason.endswith("but it is ACTIVATABLE")
    ev = rejection(h.send(job_cmd("TIME_OUT", 999, deadline_ms=deadline)))
    assert ev.rejection_type == "NOT_FOUND"


def test_checker_does_not_write_a_second_time_out_while_one_is_in_flight(h):
    key = create(h, timeout_ms=1000).key
    started(h, key)
    h.clock.advance(5000)
    first = h.checker.collect(h.clock.now_ms())
    assert [c.intent for c in first] == ["TIME_OUT"]
    assert h.checker.collect(h.clock.now_ms()) == []
    assert h.checker.wait_ms(h.clock.now_ms()) > 0
    h.send(first[0])
    assert h.checker.in_flight == 0 and h.checker.next_fire_ms is None


def test_checker_wakes_at_the_earliest_due_date(h):
    for timeout in (5000, 2000, 9000):
        started(h, create(h, timeout_ms=timeout).key)
    now = h.clock.now_ms()
    assert h.checker.wait_ms(now) == 2001
    h.clock.advance(2001)
    assert [e.intent for e in h.check_due()] == ["TIMED_OUT"]
    assert h.checker.wait_ms(h.clock.now_ms()) == 3000


def test_checker_caps_each_round(tmp_path):
    h = Harness(tmp_path / "cap")
    h.checker._limit = 10
    for _ in range(25):
        started(h, create(h, timeout_ms=100).key)
    h.clock.advance(101)
    rounds = []
    while (cmds := h.checker.collect(h.clock.now_ms())):
        rounds.append(len(cmds))
    assert rounds == [10, 10, 5]
    h.close()


def test_fail_vector_z2_no_backoff_is_activatable_at_once(h):
    key = create(h, retries=3).key
    started(h, key)
    (ev,) = h.send(job_cmd("FAIL", key, attempt=1, retries=2, retry_backoff_ms=0, error_message="boom"))
    assert ev.intent == "FAILED" and ev.value["retries"] == 2 and ev.value["error_message"] == "boom"
    job = h.job(key)
    assert job["state"] == "ACTIVATABLE" and job["retries"] == 2 and job["attempt"] == 2
    assert h.tasks[-1][1].value["attempt"] == 2


def test_fail_vector_z3_backoff_then_recur(h):
    t0 = h.clock.now_ms()
    key = create(h).key
    started(h, key)
    (ev,) = h.send(job_cmd("FAIL", key, attempt=1, retries=2, retry_backoff_ms=10_000))
    assert ev.intent == "FAILED" and h.job(key)["recur_at_ms"] == t0 + 10_000
    h.clock.set(t0 + 10_000)
    assert h.check_due() == []
    h.clock.set(t0 + 10_001)
    (recurred,) = h.check_due()
    assert recurred.intent == "RECURRED_AFTER_BACKOFF"
    assert h.job(key)["state"] == "ACTIVATABLE" and len(h.tasks) == 2


def test_fail_vector_z4_no_retries_opens_incident_and_update_retries_resolves_it(h):
    key = create(h).key
    started(h, key)
    failed, incident = h.send(job_cmd("FAIL", key, attempt=1, retries=0))
    assert failed.intent == "FAILED"
    assert incident.value_type == "INCIDENT" and incident.intent == "CREATED"
    assert incident.value == {"error_type": "JOB_NO_RETRIES", "error_message": "No more retries left.",
                              "job_key": key, "job_type": "payments"}
    assert len(h.tasks) == 1
    ev = rejection(h.send(job_cmd("UPDATE_RETRIES", key, retries=0)))
    assert ev.rejection_type == "INVALID_ARGUMENT"
    updated, resolved = h.send(job_cmd("UPDATE_RETRIES", key, retries=2))
    assert updated.intent == "RETRIES_UPDATED" and updated.value["retries"] == 2
    assert resolved.intent == "RESOLVED" and resolved.key == incident.key
    assert h.job(key)["state"] == "ACTIVATABLE" and h.tasks[-1][1].value["attempt"] == 2


def test_fail_keeps_the_error_message_in_the_incident(h):
    key = create(h).key
    started(h, key)
    _, incident = h.send(job_cmd("FAIL", key, attempt=1, retries=0, error_message="card declined"))
    assert incident.value["error_message"] == "card declined"


def test_fail_rejections(h):
    ev = rejection(h.send(job_cmd("FAIL", 42, attempt=1, retries=1)))
    assert ev.rejection_type == "NOT_FOUND"
    key = create(h).key
    ev = rejection(h.send(job_cmd("FAIL", key, attempt=1, retries=1)))
    assert "it is ACTIVATABLE, not STARTED" in ev.rejection_reason


def test_cancel_removes_job_and_resolves_incident(h):
    key = create(h).key
    started(h, key)
    h.send(job_cmd("FAIL", key, attempt=1, retries=0))
    resolved, canceled = h.send(job_cmd("CANCEL", key))
    assert resolved.intent == "RESOLVED" and canceled.intent == "CANCELED"
    assert h.job(key) is None
    assert rejection(h.send(job_cmd("CANCEL", key))).rejection_type == "NOT_FOUND"


def test_undecodable_bytes_become_a_rejection_and_processing_goes_on(h):
    ev = rejection(h.send(b"\xff\x00garbage"))
    assert ev.value_type == "UNKNOWN" and ev.rejection_type == "UNDECODABLE"
    assert ev.rejection_reason.startswith("cannot decode command")
    assert ev.source_position == 0
    create(h)


def test_unknown_value_type_and_intent_are_rejected(h):
    ev = rejection(h.send(Record.command("ROCKET", "LAUNCH")))
    assert ev.rejection_type == "UNKNOWN_COMMAND" and ev.rejection_reason == "no processor for ROCKET LAUNCH"
    ev = rejection(h.send(Record.command("JOB", "EXPLODE", {})))
    assert ev.rejection_reason == "no processor for JOB EXPLODE"
    ev = rejection(h.send(Record(RecordType.EVENT, "JOB", "CREATED", {})))
    assert "expected a COMMAND" in ev.rejection_reason


def test_oversized_command_is_rejected_without_echoing_it(h):
    ev = rejection(h.send(b"x" * (512 * 1024 + 1)))
    assert ev.rejection_type == "EXCEEDED_SIZE" and "524289 bytes" in ev.rejection_reason
    assert ev.value is None


def test_json_commands_are_accepted(h):
    data = b'{"value_type": "JOB", "intent": "CREATE", "job": {"type": "q", "payload": "[1]"}}'
    (ev,) = h.send(data, headers=[("content-type", JSON_CONTENT_TYPE)])
    assert ev.intent == "CREATED" and ev.value["payload"] == "[1]" and ev.value["retries"] == 3
    ev = rejection(h.send(b'{"intent": 3}', headers=[("content-type", JSON_CONTENT_TYPE)]))
    assert ev.rejection_type == "UNDECODABLE" and "value_type" in ev.rejection_reason


def test_a_processor_that_raises_costs_one_command_and_leaves_no_writes(h, monkeypatch):
    from streamproc.engine import partition

    def explode(cmd, ctx):
        ctx.keys.next_key()
        ctx.out.event("JOB", "CREATED", 1, {})
        raise RuntimeError("bug")

    monkeypatch.setitem(partition.PROCESSORS, ("JOB", "CREATE"), explode)
    ev = rejection(h.send(job_cmd("CREATE", type="q", payload="{}")))
    assert ev.rejection_type == "PROCESSING_ERROR" and ev.rejection_reason == "processing failed: RuntimeError: bug"
    monkeypatch.undo()
    assert partition_of_key(create(h).key) == 3
    assert create(h).key & 0xFFFF == 2  # the failed command consumed no key


def test_a_processor_writing_an_unencodable_record_costs_one_command(h, monkeypatch):
    from streamproc.engine import partition

    def bad_event(cmd, ctx):
        ctx.out.event("JOB", "CREATED", 1, {"retries": "not a number"})

    monkeypatch.setitem(partition.PROCESSORS, ("JOB", "CREATE"), bad_event)
    ev = rejection(h.send(job_cmd("CREATE", type="q", payload="{}")))
    assert ev.rejection_type == "PROCESSING_ERROR" and "retries" in ev.rejection_reason
    assert h.proc.output.events == []
    monkeypatch.undo()
    create(h)


@pytest.mark.parametrize("family_name, field, intent", [
    ("JOB_DEADLINES", "deadline_ms", "TIME_OUT"), ("JOB_BACKOFF", "recur_at_ms", "RECUR_AFTER_BACKOFF")])
def test_a_due_date_entry_no_job_implies_is_dropped_by_its_rejection_not_sent_at_every_pass(
        h, family_name, field, intent):
    """What an engine from before can leave behind on a rollback: an index entry whose job
    no longer has that due date (or no longer exists)."""
    from streamproc.state.families import Family
    from streamproc.state.keys import time_key
    family = Family[family_name]
    key = create(h, timeout_ms=1000).key
    started(h, key)
    phantoms = {(family, time_key(500, key)): b"", (family, time_key(600, 999_999)): b""}
    h.db.apply(phantoms, {"changelog_offset": h.position})
    h.checker.refresh()
    h.clock.advance(700)
    refused = h.check_due()
    assert sorted(r.rejection_type for r in refused) == ["INVALID_STATE", "NOT_FOUND"]
    assert all(r.intent == intent for r in refused)
    assert h.check_due() == []  # not sent again
    assert [k for k, _ in h.db.scan(family) if k in {k for _, k in phantoms}] == []
    assert h.job(key)["state"] == "STARTED"  # the job itself is untouched
