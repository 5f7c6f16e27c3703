"""Job push through the partition processor with a manual clock: job streams registered,
renewed, unregistered and expired; startable jobs pushed to a stream with free credit (or
published on their task queue); credits coming back when a pushed attempt ends."""

from __future__ import annotations

import orjson
import pytest

from streamproc.protocol import codec
from streamproc.protocol.records import Record, RecordType
from streamproc.state.db import PendingWrites
from streamproc.state.families import Family
from streamproc.state.job_streams import JobStreams
from tests.engine.harness import Harness

QUEUE = "payments"
LEASE_MS = 15_000


@pytest.fixture
def h(tmp_path):
    harness = Harness(tmp_path / "p0", partition=0)
    yield harness
    harness.close()


def stream_cmd(intent, stream_id="s1", reply_partition=5, queue=QUEUE, **value):
    return Record.command("JOB_STREAM", intent, {"queue": queue, "stream_id": stream_id, **value},
                          request_id=f"{intent.lower()}-{stream_id}", reply_partition=reply_partition)


def register(h, stream_id="s1", credits=4, reply_partition=5, lease_ms=LEASE_MS):
    (ev,) = h.send(stream_cmd("REGISTER", stream_id, reply_partition, worker=f"worker-{stream_id}",
                              credits=credits, lease_ms=lease_ms))
    assert ev.intent == "REGISTERED", ev.rejection_reason
    return ev


def renew(h, stream_id="s1", credits=4, lease_ms=LEASE_MS):
    return h.send(stream_cmd("RENEW", stream_id, credits=credits, lease_ms=lease_ms))


def job_cmd(intent, key=-1, **value):
    return Record.command("JOB", intent, value, key=key, request_id="req-1")


def create(h, timeout_ms=1000, retries=3, reply_partition=-1):
    cmd = Record.command("JOB", "CREATE", {"type": QUEUE, "payload": '{"amount": 5}', "retries": retries,
                                           "timeout_ms": timeout_ms}, request_id="c", reply_partition=reply_partition)
    events = h.send(cmd)
    assert events[0].intent == "CREATED", events[0].rejection_reason
    return events


def pushes(h):
    """(reply partition, record) of the jobs pushed so far: answers under <stream>/<key>/<attempt>."""
    return [(p, r) for p, r in h.replies if r.value_type == "JOB" and r.request_id.count("/") == 2]


def pushed_to(h):
    return [r.request_id.split("/")[0] for _, r in pushes(h)]


def stream(h, stream_id="s1"):
    return JobStreams(PendingWrites(h.db)).streams_of(QUEUE).get(stream_id)


def rejection(events):
    (ev,) = events
    assert ev.record_type is RecordType.COMMAND_REJECTION
    return ev


# Streams: register, renew, unregister, expire ------------------------------------------------

def test_a_stream_registers_renews_and_unregisters(h):
    ev = register(h, credits=3)
    assert ev.value == {"queue": QUEUE, "stream_id": "s1", "worker": "worker-s1", "credits": 3, "lease_ms": LEASE_MS,
                        "lease_until_ms": h.clock.now_ms() + LEASE_MS, "in_use": 0}
    (partition, answer), = h.replies
    assert partition == 5 and answer.intent == "REGISTERED" and answer.request_id == "register-s1"
    h.clock.advance(5000)
    (renewed,) = renew(h, credits=7, lease_ms=20_000)
    assert renewed.intent == "RENEWED" and renewed.value["credits"] == 7
    assert renewed.value["lease_until_ms"] == h.clock.now_ms() + 20_000
    assert [k[:8] for k, _ in h.db.scan(Family.JOB_STREAM_LEASES)] == [
        (h.clock.now_ms() + 20_000).to_bytes(8, "big")]  # the old lease key moved
    (gone,) = h.send(stream_cmd("UNREGISTER"))
    assert gone.intent == "UNREGISTERED" and stream(h) is None
    assert h.db.count(Family.JOB_STREAMS) == 0 and h.db.count(Family.JOB_STREAM_LEASES) == 0
    assert h.replies[-1][1].intent == "UNREGISTERED"
    ev = rejection(h.send(stream_cmd("UNREGISTER")))
    assert ev.rejection_type == "NOT_FOUND" and "no such stream is registered on partition 0" in ev.rejection_reason
    ev = rejection(renew(h))
    assert ev.rejection_type == "NOT_FOUND" and h.replies[-1] == (5, ev)


def test_a_lease_expires_strictly_after_its_end_and_stale_expires_are_rejected(h):
    lease_until = register(h).value["lease_until_ms"]
    h.clock.advance(5000)
    renewed_until = renew(h)[0].value["lease_until_ms"]
    h.clock.set(lease_until + 1)
    stale = Record.command("JOB_STREAM", "EXPIRE", {"queue": QUEUE, "stream_id": "s1", "lease_until_ms": lease_until})
    ev = rejection(h.send(stale))
    assert ev.rejection_type == "INVALID_STATE" and f"its lease now ends at {renewed_until}" in ev.rejection_reason
    assert h.check_due() == []  # the checker only knows the renewed lease
    h.clock.set(renewed_until)
    exact = Record.command("JOB_STREAM", "EXPIRE", {"queue": QUEUE, "stream_id": "s1", "lease_until_ms": renewed_until})
    assert "that time has not passed" in rejection(h.send(exact)).rejection_reason
    assert h.check_due() == []
    h.clock.advance(1)
    (expired,) = h.check_due()
    assert expired.intent == "EXPIRED" and expired.value["lease_until_ms"] == renewed_until
    assert stream(h) is None and h.checker.next_fire_ms is None
    assert rejection(h.send(exact)).rejection_type == "NOT_FOUND"
    assert rejection(renew(h)).rejection_type == "NOT_FOUND"  # the worker then registers again
    register(h)


def test_a_lease_is_no_wait_for_time_skipping(h):
    register(h)
    assert h.checker.next_fire_ms == h.clock.now_ms() + LEASE_MS + 1
    assert h.checker.next_wait_ms is None
    create(h, timeout_ms=60_000)  # pushed: its deadline is a due date like any job's
    assert h.checker.next_fire_ms == h.clock.now_ms() + LEASE_MS + 1
    assert h.checker.next_wait_ms == h.clock.now_ms() + 60_001


@pytest.mark.parametrize("intent, value, reply_partition, reason", [
    ("REGISTER", {"credits": 0}, 5, "credits must be in [1, 4096], got 0"),
    ("REGISTER", {"credits": 4097}, 5, "credits must be in [1, 4096], got 4097"),
    ("REGISTER", {"lease_ms": 999}, 5, "lease_ms must be in [1000, 600000], got 999"),
    ("REGISTER", {"lease_ms": 600_001}, 5, "lease_ms must be in [1000, 600000], got 600001"),
    ("REGISTER", {"stream_id": ""}, 5, "stream_id must be 1-64 characters, got 0"),
    ("REGISTER", {"stream_id": "x" * 65}, 5, "stream_id must be 1-64 characters, got 65"),
    ("REGISTER", {"queue": "bad queue!"}, 5, "task queue must be 1-200 characters"),
    ("REGISTER", {}, -1, "reply_partition must be set"),
    ("RENEW", {"credits": -1}, 5, "credits must be in [0, 4096], got -1"),
    ("RENEW", {"lease_ms": 0}, 5, "lease_ms must be in [1000, 600000], got 0"),
    ("UNREGISTER", {"stream_id": ""}, 5, "stream_id must be 1-64 characters, got 0"),
    # a "/" would make this stream's pushes match the prefix "known/" another worker listens for
    ("REGISTER", {"stream_id": "known/1"}, 5, "stream_id may only have letters, digits, '_' and '-', got 'known/1'"),
    ("REGISTER", {"worker": "w" * 257}, 5, "worker must be at most 256 characters, got 257"),
])
def test_bad_stream_fields_are_rejected_with_the_reason_and_change_nothing(h, intent, value, reply_partition, reason):
    register(h, "known")
    before = {f: list(h.db.scan(f)) for f in Family}
    fields = {"queue": QUEUE, "stream_id": "known", "worker": "w", "credits": 2, "lease_ms": LEASE_MS, **value}
    cmd = Record.command("JOB_STREAM", intent, fields, request_id="bad", reply_partition=reply_partition)
    ev = rejection(h.send(cmd))
    assert ev.rejection_type == "INVALID_ARGUMENT"
    assert ev.rejection_reason.startswith(f"Expected to {intent.lower()} job stream ")
    assert reason in ev.rejection_reason
    assert {f: list(h.db.scan(f)) for f in Family} == before


# Dispatch: push or publish ---------------------------------------------------------------------

def test_a_create_with_a_credited_stream_is_started_and_pushed_in_the_same_command(h):
    register(h, credits=2, reply_partition=5)
    created, started = create(h, timeout_ms=30_000, reply_partition=1)
    key = created.key
    assert (created.intent, started.intent, started.key) == ("CREATED", "STARTED", key)
    assert started.value["worker"] == "worker-s1" and started.value["deadline_ms"] == h.clock.now_ms() + 30_000
    assert h.tasks == []
    (partition, push), = pushes(h)
    assert partition == 5 and push.request_id == f"s1/{key}/1" and push.intent == "STARTED" and push.key == key
    assert {k: push.value[k] for k in ("type", "payload", "retries", "timeout_ms", "attempt", "worker",
                                       "deadline_ms")} == {
        "type": QUEUE, "payload": '{"amount": 5}', "retries": 3, "timeout_ms": 30_000, "attempt": 1,
        "worker": "worker-s1", "deadline_ms": h.clock.now_ms() + 30_000}
    # The CREATE's client hears its CREATED only.
    assert [(p, r.intent) for p, r in h.replies if p == 1] == [(1, "CREATED")]
    assert stream(h).in_use == 1
    job = h.job(key)
    assert job["state"] == "STARTED" and job["stream"] == "s1"
    assert h.checker.next_wait_ms == h.clock.now_ms() + 30_001  # its deadline is armed


def test_without_free_credit_or_without_a_stream_the_job_goes_to_its_task_queue(h):
    first = create(h)
    assert len(first) == 1 and [q for q, _ in h.tasks] == [QUEUE] and "stream" not in h.job(first[0].key)
    register(h, credits=1)
    assert len(create(h)) == 2  # pushed
    (created,) = create(h)  # the stream is full
    assert [t.key for _, t in h.tasks] == [first[0].key, created.key]
    assert h.job(created.key)["state"] == "ACTIVATABLE" and stream(h).in_use == 1


def test_a_stream_past_its_lease_is_not_pushed_to_before_its_expire_comes(h):
    lease_until = register(h, lease_ms=10_000).value["lease_until_ms"]
    h.clock.set(lease_until)
    assert len(create(h)) == 2  # up to its end the lease holds
    h.clock.set(lease_until + 1)  # ended; no EXPIRE processed yet (a backlog before it)
    (created,) = create(h)
    assert [t.key for _, t in h.tasks] == [created.key] and stream(h).in_use == 1


def test_a_queue_takes_streams_up_to_its_cap_and_refuses_more(h, monkeypatch):
    from streamproc.engine.jobs import streams as stream_processors
    monkeypatch.setattr(stream_processors, "MAX_STREAMS_PER_QUEUE", 3)
    for i in range(3):
        register(h, f"s{i}")
    before = {f: list(h.db.scan(f)) for f in Family}
    ev = rejection(h.send(stream_cmd("REGISTER", "s3", worker="w", credits=1, lease_ms=LEASE_MS)))
    assert ev.rejection_type == "RESOURCE_EXHAUSTED"
    assert "the queue has 3 streams on partition 0, the most it may have" in ev.rejection_reason
    assert {f: list(h.db.scan(f)) for f in Family} == before
    register(h, "s1")  # a known stream registers again
    h.send(stream_cmd("UNREGISTER", "s0"))
    register(h, "s3")  # room again


def test_renew_with_zero_credits_stops_pushes_and_a_renew_with_credits_resumes_them(h):
    register(h, credits=4)
    create(h)
    renew(h, credits=0)
    (created,) = create(h)
    assert [t.key for _, t in h.tasks] == [created.key] and stream(h).in_use == 1
    renew(h, credits=2)
    assert len(create(h)) == 2


def test_a_topic_start_of_a_pushed_job_is_rejected(h):
    register(h)
    key = create(h)[0].key
    ev = rejection(h.send(job_cmd("START", key, attempt=1, worker="topic-worker")))
    assert ev.rejection_type == "INVALID_STATE" and "it is STARTED, not ACTIVATABLE" in ev.rejection_reason
    assert h.job(key)["worker"] == "worker-s1" and stream(h).in_use == 1


def test_a_job_started_by_a_topic_worker_holds_no_credit(h):
    key = create(h)[0].key
    register(h, credits=1)
    h.send(job_cmd("START", key, attempt=1, worker="topic-worker"))
    assert "stream" not in h.job(key) and stream(h).in_use == 0
    h.send(job_cmd("COMPLETE", key, attempt=1, result="{}"))
    assert stream(h).in_use == 0


# Credits come back -----------------------------------------------------------------------------

def test_complete_releases_the_credit(h):
    register(h, credits=1)
    key = create(h)[0].key
    (done,) = h.send(job_cmd("COMPLETE", key, attempt=1, result="{}"))
    assert done.intent == "COMPLETED" and stream(h).in_use == 0
    assert len(create(h)) == 2 and stream(h).in_use == 1


def test_fail_with_retries_and_no_backoff_releases_and_pushes_the_next_attempt(h):
    register(h, credits=1)
    key = create(h)[0].key
    failed, started = h.send(job_cmd("FAIL", key, attempt=1, retries=2, error_message="boom"))
    assert (failed.intent, started.intent, started.value["attempt"]) == ("FAILED", "STARTED", 2)
    assert pushed_to(h) == ["s1", "s1"] and pushes(h)[-1][1].request_id == f"s1/{key}/2"
    assert stream(h).in_use == 1 and h.job(key)["stream"] == "s1"


def test_fail_with_a_backoff_releases_and_the_recurrence_pushes(h):
    register(h, credits=1)
    key = create(h)[0].key
    (failed,) = h.send(job_cmd("FAIL", key, attempt=1, retries=2, retry_backoff_ms=500))
    assert failed.intent == "FAILED" and stream(h).in_use == 0 and "stream" not in h.job(key)
    h.clock.advance(501)
    recurred, started = h.check_due()
    assert (recurred.intent, started.intent, started.value["attempt"]) == ("RECURRED_AFTER_BACKOFF", "STARTED", 2)
    assert stream(h).in_use == 1 and h.tasks == []


def test_fail_out_of_retries_releases_and_update_retries_pushes_again(h):
    register(h, credits=1)
    key = create(h)[0].key
    failed, incident = h.send(job_cmd("FAIL", key, attempt=1, retries=0))
    assert (failed.intent, incident.value_type) == ("FAILED", "INCIDENT")
    assert stream(h).in_use == 0 and "stream" not in h.job(key)
    updated, resolved, started = h.send(job_cmd("UPDATE_RETRIES", key, retries=1))
    assert (updated.intent, resolved.intent, started.intent) == ("RETRIES_UPDATED", "RESOLVED", "STARTED")
    assert stream(h).in_use == 1 and pushes(h)[-1][1].request_id == f"s1/{key}/2"


def test_cancel_releases_the_credit(h):
    register(h, credits=1)
    key = create(h)[0].key
    (canceled,) = h.send(job_cmd("CANCEL", key))
    assert canceled.intent == "CANCELED" and stream(h).in_use == 0


def test_a_timed_out_attempt_is_pushed_to_another_stream_when_one_has_credit(h):
    register(h, "a", credits=1)
    register(h, "b", credits=1)
    key = create(h, timeout_ms=1000)[0].key
    first = pushed_to(h)[0]
    other = "b" if first == "a" else "a"
    h.clock.advance(1001)
    timed_out, started = h.check_due()
    assert (timed_out.intent, started.intent, started.value["attempt"]) == ("TIMED_OUT", "STARTED", 2)
    assert timed_out.value["retries"] == 3
    assert pushed_to(h) == [first, other] and (stream(h, first).in_use, stream(h, other).in_use) == (0, 1)
    late = rejection(h.send(job_cmd("COMPLETE", key, attempt=1, result="{}")))
    assert late.rejection_type == "INVALID_STATE" and stream(h, other).in_use == 1


def test_a_timed_out_attempt_goes_back_to_its_stream_when_it_is_the_only_one(h):
    register(h, credits=1)
    key = create(h, timeout_ms=1000)[0].key
    h.clock.advance(1001)
    h.check_due()
    assert pushed_to(h) == ["s1", "s1"] and pushes(h)[-1][1].request_id == f"s1/{key}/2"
    assert stream(h).in_use == 1


# Fairness ---------------------------------------------------------------------------------------

def test_two_streams_with_equal_credits_take_turns(h):
    register(h, "a", credits=4)
    register(h, "b", credits=4)
    for _ in range(8):
        create(h, timeout_ms=60_000)
    order = pushed_to(h)
    assert sorted(order) == ["a"] * 4 + ["b"] * 4
    for n in range(1, 9):  # never more than one apart
        assert abs(order[:n].count("a") - order[:n].count("b")) <= 1
    assert h.tasks == [] and (stream(h, "a").in_use, stream(h, "b").in_use) == (4, 4)
    create(h)
    assert len(h.tasks) == 1  # both full


def test_the_stream_with_most_free_credit_wins_and_ties_go_by_the_job_key(h):
    register(h, "big", credits=8)
    register(h, "small", credits=2)
    keys = [create(h, timeout_ms=60_000)[0].key for _ in range(6)]
    assert pushed_to(h) == ["big"] * 6  # until both have 2 free
    tied = create(h, timeout_ms=60_000)[0].key
    assert pushed_to(h)[-1] == ["big", "small"][tied % 2]
    assert keys == sorted(keys)


def test_a_batch_processed_again_after_an_abort_pushes_as_the_state_says(h):
    register(h, "a", credits=2)
    register(h, "b", credits=2)
    first = create(h)[0].key
    assert pushed_to(h) == [["a", "b"][first % 2]]
    cmd = Record.command("JOB", "CREATE", {"type": QUEUE, "payload": "{}", "retries": 1, "timeout_ms": 1000})
    h.proc.process(codec.encode(cmd), None, h.position)
    (aborted,) = [r.request_id.split("/")[0] for _, r in h.proc.output.replies]
    h.proc.reset_batch()  # an aborted transaction: the batch is processed again
    h.send(cmd)
    # The aborted take is forgotten with the batch (the streams read again): the stream
    # with more free credit is chosen again, and each stream holds one job.
    assert aborted != pushed_to(h)[0] and pushed_to(h)[1] == aborted
    assert (stream(h, "a").in_use, stream(h, "b").in_use) == (1, 1)


# Removed streams and their started jobs -------------------------------------------------------

def test_an_expired_streams_started_jobs_time_out_and_a_new_registration_counts_them(h):
    register(h, credits=2, lease_ms=10_000)
    keys = [create(h, timeout_ms=60_000)[0].key for _ in range(2)]
    h.clock.advance(10_001)
    (expired,) = h.check_due()
    assert expired.intent == "EXPIRED" and expired.value["in_use"] == 2
    (created,) = create(h)  # no stream: published
    assert [t.key for _, t in h.tasks] == [created.key]
    register(h, credits=3)  # the same worker registers again: its two jobs still count
    assert stream(h).in_use == 2 and len(create(h)) == 2 and stream(h).in_use == 3
    h.send(job_cmd("COMPLETE", keys[0], attempt=1, result="{}"))
    assert stream(h).in_use == 2


def test_a_gone_stream_is_forgotten_when_its_last_pushed_job_ends(h):
    register(h, credits=2)
    key = create(h, timeout_ms=1000)[0].key
    h.send(stream_cmd("UNREGISTER"))
    assert h.db.count(Family.JOB_STREAMS) == 1 and h.db.count(Family.JOB_STREAM_LEASES) == 0
    assert rejection(renew(h)).rejection_type == "NOT_FOUND"
    h.clock.advance(1001)
    timed_out, = h.check_due()  # released, and the next attempt is published: no stream left
    assert timed_out.intent == "TIMED_OUT" and [t.value["attempt"] for _, t in h.tasks] == [2]
    assert h.db.count(Family.JOB_STREAMS) == 0 and stream(h) is None
    assert h.job(key)["state"] == "ACTIVATABLE" and "stream" not in h.job(key)


def test_streams_of_other_queues_are_not_used(h):
    h.send(stream_cmd("REGISTER", queue="other", worker="w", credits=4, lease_ms=LEASE_MS))
    (created,) = create(h)
    assert [t.key for _, t in h.tasks] == [created.key]


def test_a_json_register_is_processed(h):
    body = orjson.dumps({"value_type": "JOB_STREAM", "intent": "REGISTER", "request_id": "j", "reply_partition": 2,
                         "job_stream": {"queue": QUEUE, "stream_id": "json", "worker": "w", "credits": 1}})
    (ev,) = h.send(body, [(codec.CONTENT_TYPE_HEADER, codec.JSON_CONTENT_TYPE)])
    assert ev.intent == "REGISTERED" and ev.value["lease_ms"] == LEASE_MS
    assert len(create(h)) == 2 and pushes(h)[0][0] == 2


def test_a_partition_reopened_on_its_database_keeps_its_streams_and_their_counts(tmp_path):
    # The same partition restarted on its database: streams and their counts are state.
    h = Harness(tmp_path / "restart")
    register(h, credits=2)
    create(h, timeout_ms=60_000)
    h.close()
    again = Harness(tmp_path / "restart")
    try:
        assert stream(again).in_use == 1
        assert len(create(again)) == 2 and stream(again).in_use == 2
    finally:
        again.close()
