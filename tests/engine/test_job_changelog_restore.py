"""The changelog leaves out the jobs' due-date indexes (a started attempt's deadline, a
failed job's backoff: a put and a tombstone per attempt), and a restore rebuilds them from
the job documents: the state restored, in one go, in chunks, or on top of an earlier copy,
is the state the engine wrote, and what was due before the restore comes due after it. A
changelog from before, which carried the indexes, restores the same."""

from __future__ import annotations

import pytest

from streamproc.kafka.changelog import changelog_key
from streamproc.state.db import PartitionDb
from streamproc.state.families import Family
from streamproc.state.jobs import JobDueDates
from streamproc.state.keys import time_key
from tests.engine import harness
from tests.engine.harness import Harness
from tests.engine.restore import restore_records, state_of
from tests.engine.test_job_push import create, job_cmd, register

INDEXES = (Family.JOB_DEADLINES, Family.JOB_BACKOFF)
LEASE_MS = 600_000  # the stream outlives every test


@pytest.fixture
def h(tmp_path):
    harness = Harness(tmp_path / "engine")
    yield harness
    harness.close()


def _started(h, timeout_ms=60_000) -> int:
    """A job published on its task queue and taken through START."""
    (created,) = create(h, timeout_ms=timeout_ms)
    (started,) = h.send(job_cmd("START", created.key, attempt=1, worker="topic-worker"))
    assert started.intent == "STARTED", started.rejection_reason
    return created.key


def _pushed(h, timeout_ms=60_000) -> int:
    """A job pushed to the registered stream at its CREATE."""
    created, started = create(h, timeout_ms=timeout_ms)
    assert started.intent == "STARTED" and started.value["worker"] == "worker-s1"
    return created.key


def _index_records(records) -> list:
    return [key for key, _ in records if key[0] in INDEXES]


def _check_restores(h, tmp_path, name: str, records=None) -> None:
    records = h.changelog if records is None else records
    for chunk in (1, 3, len(records)):
        db = restore_records(PartitionDb(tmp_path / f"{name}-{chunk}", 0), records, chunk)
        try:
            assert state_of(db) == state_of(h.db), f"restored in chunks of {chunk}"
        finally:
            db.close()
    # On top of a copy restored up to the middle, as a restart with a local checkpoint does.
    half = len(records) // 2
    db = restore_records(restore_records(PartitionDb(tmp_path / f"{name}-halves", 0), records[:half], 2),
                         records[half:], 5)
    try:
        assert state_of(db) == state_of(h.db), "restored on top of a copy"
    finally:
        db.close()


def test_a_jobs_life_puts_no_due_date_on_the_changelog_but_the_engine_keeps_its_index(h):
    register(h, credits=1, lease_ms=LEASE_MS)
    pushed = _pushed(h, timeout_ms=1_000)
    started = _started(h, timeout_ms=1_000)
    assert h.db.count(Family.JOB_DEADLINES) == 2  # the engine's own copy keeps the index
    h.clock.advance(1_001)
    assert sorted(e.intent for e in h.check_due() if e.value_type == "JOB") == ["STARTED", "TIMED_OUT", "TIMED_OUT"]
    h.send(job_cmd("START", started, attempt=2, worker="topic-worker"))
    h.send(job_cmd("FAIL", pushed, attempt=2, retries=2, error_message="boom", retry_backoff_ms=500))
    assert (h.db.count(Family.JOB_DEADLINES), h.db.count(Family.JOB_BACKOFF)) == (1, 1)
    h.clock.advance(501)
    assert [e.intent for e in h.check_due()] == ["RECURRED_AFTER_BACKOFF", "STARTED"]  # pushed again
    for key in (pushed, started):
        h.send(job_cmd("COMPLETE", key, attempt=h.job(key)["attempt"], result="{}"))
    assert h.db.count(Family.JOBS) == 0 and all(h.db.count(f) == 0 for f in INDEXES)
    assert {key[0] for key, _ in h.changelog} >= {Family.JOBS} and _index_records(h.changelog) == []


def test_a_job_puts_only_its_document_on_the_changelog(h):
    _started(h)  # a queue's first job also writes the queue's admission
    # One command a batch: a job taken through START is its document created, started, deleted ...
    before = len(h.changelog)
    key = _started(h)
    h.send(job_cmd("COMPLETE", key, attempt=1, result="{}"))
    assert [k[0] for k, _ in h.changelog[before:]] == [Family.JOBS] * 3
    # ... and a pushed one its document created started, then deleted, beside its stream's credit.
    register(h, credits=1, lease_ms=LEASE_MS)
    before = len(h.changelog)
    key = _pushed(h)
    h.send(job_cmd("COMPLETE", key, attempt=1, result="{}"))
    assert sorted(k[0] for k, _ in h.changelog[before:]) == [Family.JOBS] * 2 + [Family.JOB_STREAMS] * 2


def test_a_restore_rebuilds_the_due_dates_the_engine_had(h, tmp_path):
    register(h, credits=1, lease_ms=LEASE_MS)
    pushed = _pushed(h)
    started = _started(h)
    backing_off = _started(h)
    h.send(job_cmd("FAIL", backing_off, attempt=1, retries=2, error_message="boom", retry_backoff_ms=5_000))
    done = _started(h)
    h.send(job_cmd("COMPLETE", done, attempt=1, result="{}"))
    out_of_retries = _started(h)
    h.send(job_cmd("FAIL", out_of_retries, attempt=1, retries=0, error_message="boom"))
    (waiting,) = create(h)  # on its task queue: no due date
    now = h.clock.now_ms()
    due = JobDueDates(h.db)
    assert sorted(key for _, key in due.timed_out(now + 3_600_000, 10)) == sorted([pushed, started])
    assert due.backoff_over(now + 3_600_000, 10) == [(now + 5_000, backing_off)]
    assert h.job(waiting.key)["state"] == "ACTIVATABLE" and h.job(out_of_retries)["state"] == "FAILED"
    _check_restores(h, tmp_path, "open")
    # Every job ended: the restored index is empty, as the engine's.
    h.clock.advance(5_001)
    h.check_due()
    h.send(job_cmd("START", backing_off, attempt=2, worker="topic-worker"))
    h.send(job_cmd("START", waiting.key, attempt=1, worker="topic-worker"))
    for key in (pushed, started, backing_off, waiting.key):
        h.send(job_cmd("COMPLETE", key, attempt=h.job(key)["attempt"], result="{}"))
    h.send(job_cmd("CANCEL", out_of_retries))
    assert h.db.count(Family.JOBS) == 0 and all(h.db.count(f) == 0 for f in INDEXES)
    _check_restores(h, tmp_path, "closed")
    assert _index_records(h.changelog) == []


def _one_record_per_write(writes):
    """The changelog as an engine from before wrote it for jobs: every write, indexes too."""
    return [(changelog_key(family, key), value) for (family, key), value in writes.items()]


def test_a_changelog_from_before_with_the_indexes_on_it_restores_the_same(h, tmp_path, monkeypatch):
    # An engine from before starts jobs and fails one with a backoff ...
    monkeypatch.setattr(harness, "changelog_records", _one_record_per_write)
    register(h, credits=1, lease_ms=LEASE_MS)
    pushed = _pushed(h)
    started = _started(h)
    backing_off = _started(h)
    h.send(job_cmd("FAIL", backing_off, attempt=1, retries=2, error_message="boom", retry_backoff_ms=5_000))
    ended_by_old = _started(h)
    h.send(job_cmd("COMPLETE", ended_by_old, attempt=1, result="{}"))
    assert len(_index_records(h.changelog)) == 7  # 4 deadlines put and 2 deleted, a backoff put
    # The index records are not trusted but skipped: a stale one the documents contradict
    # (the job's deadline is not at 1 ms) is not restored.
    h.changelog.insert(len(h.changelog) // 2, (changelog_key(Family.JOB_DEADLINES, time_key(1, started)), b""))
    old = len(h.changelog)
    _check_restores(h, tmp_path, "old")
    # ... and a new one takes over: it ends the attempts the old one's records started
    # without a tombstone for their index entries; the records from before are skipped.
    monkeypatch.undo()
    h.send(job_cmd("COMPLETE", pushed, attempt=1, result="{}"))
    h.clock.advance(5_001)
    assert [e.intent for e in h.check_due()] == ["RECURRED_AFTER_BACKOFF", "STARTED"]  # pushed to the free stream
    assert _index_records(h.changelog[old:]) == []
    assert sorted(key for _, key in JobDueDates(h.db).timed_out(h.clock.now_ms() + 3_600_000, 10)) == sorted(
        [started, backing_off])
    _check_restores(h, tmp_path, "both")


def test_jobs_time_out_and_recur_after_a_restore_into_a_fresh_partition(h, tmp_path):
    register(h, credits=1, lease_ms=LEASE_MS)
    pushed = _pushed(h, timeout_ms=2_000)
    started = _started(h, timeout_ms=1_000)
    backing_off = _started(h)
    h.send(job_cmd("FAIL", backing_off, attempt=1, retries=2, error_message="boom", retry_backoff_ms=1_500))
    restored_db = restore_records(PartitionDb(tmp_path / "restored", 0), h.changelog, 4)
    restored_db.close()
    r = Harness(tmp_path / "restored", clock=h.clock)
    try:
        assert state_of(r.db) == state_of(h.db)
        r.clock.advance(1_000)
        assert r.check_due() == []  # due strictly after the deadline
        r.clock.advance(1)
        assert [(e.intent, e.key) for e in r.check_due()] == [("TIMED_OUT", started)]
        assert [t.key for _, t in r.tasks] == [started]  # the stream's credit is taken: published
        r.clock.advance(500)
        assert [(e.intent, e.key) for e in r.check_due()] == [("RECURRED_AFTER_BACKOFF", backing_off)]
        r.clock.advance(500)
        assert [(e.intent, e.key, e.value["attempt"]) for e in r.check_due()] == [
            ("TIMED_OUT", pushed, 1), ("STARTED", pushed, 2)]  # pushed again to the stream it freed
        assert [t.key for _, t in r.tasks] == [started, backing_off]
    finally:
        r.close()
