"""Partition database: atomic batches with their checkpoint, ordered due-date scans, reopening."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamproc.state.db import STATE_LAYOUT, PartitionDb, PendingWrites
from streamproc.state.families import Family
from streamproc.state.jobs import Job, JobDueDates, Jobs
from streamproc.state.keys import time_key


@pytest.fixture
def db(tmp_path):
    db = PartitionDb(tmp_path, 0)
    yield db
    db.close()


@pytest.fixture
def pending(db):
    """Pending writes over `db`, as one transaction's commands stage them."""
    return PendingWrites(db)


def test_a_closed_partition_can_be_reopened_in_the_same_process(tmp_path):
    db = PartitionDb(tmp_path, 0)
    db.apply({(Family.JOBS, b"k"): b"v"}, {"changelog_offset": 7, "written_at_ms": 1})
    db.close()
    again = PartitionDb(tmp_path, 0)
    assert again.get(Family.JOBS, b"k") == b"v"
    assert again.checkpoint() == {"changelog_offset": 7, "written_at_ms": 1, "layout": STATE_LAYOUT}
    again.close()


def test_pending_writes_see_their_own_writes_and_discard_a_failed_command(db, pending):
    pending.put(Family.JOBS, b"a", b"1")
    pending.accept()
    pending.put(Family.JOBS, b"b", b"2")
    assert pending.get(Family.JOBS, b"b") == b"2"
    pending.discard()
    assert pending.get(Family.JOBS, b"b") is None and pending.get(Family.JOBS, b"a") == b"1"
    assert db.get(Family.JOBS, b"a") is None  # nothing reaches RocksDB before the commit


def test_due_scan_is_ordered_by_time_and_bounded_strictly_before_now(db):
    writes = {(Family.JOB_DEADLINES, time_key(t, k)): b"" for t, k in [(300, 1), (100, 9), (200, 5), (100, 2)]}
    db.apply(writes, {"changelog_offset": 0, "written_at_ms": 0})
    due = JobDueDates(db)
    assert due.timed_out(now_ms=201, limit=10) == [(100, 2), (100, 9), (200, 5)]
    assert due.timed_out(now_ms=200, limit=10) == [(100, 2), (100, 9)]
    assert due.timed_out(now_ms=1000, limit=2) == [(100, 2), (100, 9)]
    assert due.next_due_ms() == 100


def test_jobs_keep_their_deadline_index_consistent(db, pending):
    jobs = Jobs(pending)
    job = Job(type="payments", payload="{}", retries=3, timeout_ms=1000)
    jobs.start(42, job, "w", deadline_ms=500)
    jobs.fail(42, job, recur_at_ms=900)
    pending.accept()
    db.apply(pending.batch, {"changelog_offset": 0, "written_at_ms": 0})
    assert JobDueDates(db).timed_out(10_000, 10) == []
    assert JobDueDates(db).backoff_over(10_000, 10) == [(900, 42)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.dictionaries(st.integers(0, 40), st.booleans(), max_size=8), st.booleans()),
                max_size=25))
def test_first_key_follows_every_batch_of_puts_and_deletes(tmp_path_factory, batches):
    """The remembered first key of a churning due-date family is always the true smallest key."""
    db = PartitionDb(tmp_path_factory.mktemp("db"), 0)
    live: set[int] = set()
    for n, (batch, ask) in enumerate(batches):
        writes = {(Family.ACTIVITY_TIMERS, time_key(t, 1)): (b"" if put else None) for t, put in batch.items()}
        db.apply(writes, {"changelog_offset": n, "written_at_ms": 0})
        live |= {t for t, put in batch.items() if put}
        live -= {t for t, put in batch.items() if not put}
        expected = time_key(min(live), 1) if live else None
        if ask:  # not asking after every batch: the answer is then searched from the floor
            assert db.first_key(Family.ACTIVITY_TIMERS) == expected
    db.close()
    reopened = PartitionDb(db.path, 0)
    assert reopened.first_key(Family.ACTIVITY_TIMERS) == (time_key(min(live), 1) if live else None)
    reopened.close()


def test_a_key_put_and_deleted_by_one_batch_leaves_no_write_unless_it_existed_before(db, pending):
    db.apply({(Family.JOBS, b"old"): b"0"}, {"changelog_offset": 0, "written_at_ms": 0})
    for key in (b"new", b"old"):
        pending.put(Family.JOBS, key, b"1")
        pending.accept()
        pending.delete(Family.JOBS, key)
        assert pending.get(Family.JOBS, key) is None
        pending.accept()
    pending.put(Family.JOBS, b"same-command", b"1")
    pending.delete(Family.JOBS, b"same-command")
    pending.accept()
    # Nothing to write for keys that had no value before the batch; a tombstone for the one that had.
    assert pending.batch == {(Family.JOBS, b"old"): None}


def test_an_erasure_is_undone_with_its_command_and_a_committing_put_still_gets_its_tombstone(db, pending):
    pending.put(Family.JOBS, b"k", b"1")
    pending.accept()
    pending.delete(Family.JOBS, b"k")
    pending.discard()  # the deleting command failed: the put stands
    assert pending.batch == {(Family.JOBS, b"k"): b"1"} and pending.get(Family.JOBS, b"k") == b"1"
    pending.seal()  # committing, not in RocksDB yet
    pending.put(Family.JOBS, b"k", b"2")
    pending.accept()
    pending.delete(Family.JOBS, b"k")
    pending.accept()
    assert pending.batch == {(Family.JOBS, b"k"): None}


def test_a_decoded_value_is_handed_out_once_after_its_command_is_accepted_and_only_for_its_bytes(db, pending):
    run = object()
    pending.put(Family.WORKFLOW_RUNS, b"r", b"doc", decoded=run)
    # Within the command that put it, the object is its processor's own: not handed out.
    assert pending.take_decoded(Family.WORKFLOW_RUNS, b"r", b"doc") is None
    pending.accept()
    assert pending.take_decoded(Family.WORKFLOW_RUNS, b"r", b"other") is None  # stored bytes differ
    pending.put(Family.WORKFLOW_RUNS, b"r", b"doc", decoded=run)
    pending.accept()
    assert pending.take_decoded(Family.WORKFLOW_RUNS, b"r", b"doc") is run
    assert pending.take_decoded(Family.WORKFLOW_RUNS, b"r", b"doc") is None  # once: its taker changes it
    pending.put(Family.WORKFLOW_RUNS, b"r", b"doc", decoded=run)
    pending.discard()  # a command that failed leaves no object either
    pending.accept()
    assert pending.take_decoded(Family.WORKFLOW_RUNS, b"r", b"doc") is None
    pending.put(Family.WORKFLOW_RUNS, b"r", b"doc", decoded=run)
    pending.accept()
    pending.put(Family.WORKFLOW_RUNS, b"r", b"doc2")  # put again without one: the old object is not it
    pending.accept()
    pending.clear()  # an aborted batch forgets them all
    assert pending.take_decoded(Family.WORKFLOW_RUNS, b"r", b"doc") is None


def test_an_event_appended_with_its_attributes_encoded_is_stored_as_append_stores_it(db, pending):
    import orjson

    from streamproc.state.history import History

    history = History(pending)
    attributes = {"scheduled_event_id": 3, "identity": "wörker \"1\"", "details": {"a": [1, None, 2.5]}}
    event = {"event_id": 7, "event_type": "MARKER_RECORDED", "event_time_ms": 1_800_000_000_123,
             "attributes": attributes}
    size = history.append(1, event)
    stored = pending.get(Family.WORKFLOW_HISTORY, bytes(8) + b"\x00" * 7 + b"\x07")
    assert history.append_encoded(2, 7, "MARKER_RECORDED", 1_800_000_000_123, orjson.dumps(attributes)) == size
    assert pending.get(Family.WORKFLOW_HISTORY, (2).to_bytes(8, "big") + (7).to_bytes(8, "big")) == \
        pending.get(Family.WORKFLOW_HISTORY, (1).to_bytes(8, "big") + (7).to_bytes(8, "big")) == orjson.dumps(event)
    assert stored is None  # (run key 0 was not written)
