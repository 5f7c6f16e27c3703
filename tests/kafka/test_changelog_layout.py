"""The changelog's layout: a batch's new history events of a run in one record, and a
takeover from a changelog an engine from before wrote one record per event, or with the
jobs' due-date indexes on it."""

from __future__ import annotations

from datetime import timedelta

import pytest

from streamproc import activity, workflow
from streamproc.client import Client
from streamproc.clock import ManualClock
from streamproc.kafka import batch_writer
from streamproc.kafka.changelog import (
    HISTORY_EVENTS,
    MAX_HISTORY_RECORD_BYTES,
    changelog_key,
    changelog_records,
    changelog_writes,
)
from streamproc.semantics.workflow_events import EventType
from streamproc.semantics.workflow_history import check_well_formed
from streamproc.settings import Settings
from streamproc.state import db as db_module
from streamproc.state.families import Family
from streamproc.worker import Worker
from tests.support.engines import EngineThread
from tests.support.history import EventLog


def _history_key(run_key: int, event_id: int) -> bytes:
    return run_key.to_bytes(8, "big") + event_id.to_bytes(8, "big")


def _restored(records) -> dict:
    return {write: value for key, value in records for write, value in changelog_writes(key, value)}


def test_a_runs_new_events_are_one_record_and_restore_as_one_write_each():
    writes = {(Family.WORKFLOW_HISTORY, _history_key(7, 3)): b'{"event_id":3}',
              (Family.WORKFLOW_RUNS, (7).to_bytes(8, "big")): b"run 7",
              (Family.WORKFLOW_HISTORY, _history_key(9, 1)): b'{"event_id":1}',
              (Family.WORKFLOW_HISTORY, _history_key(7, 4)): b'{"event_id":4}',
              (Family.JOBS, (5).to_bytes(8, "big")): None}
    records = changelog_records(writes)
    assert len(records) == 4  # the run document, the job's tombstone, one record per run's events
    assert sorted(key for key, _ in records if key[0] == HISTORY_EVENTS) == [
        bytes((HISTORY_EVENTS,)) + _history_key(7, 3), bytes((HISTORY_EVENTS,)) + _history_key(9, 1)]
    assert _restored(records) == writes


def test_a_large_batch_of_events_is_split_below_the_record_size_bound():
    event = b"x" * (MAX_HISTORY_RECORD_BYTES // 3)
    writes = {(Family.WORKFLOW_HISTORY, _history_key(1, n)): event for n in range(1, 8)}
    records = changelog_records(writes)
    assert len(records) == 4 and all(len(value) <= MAX_HISTORY_RECORD_BYTES for _, value in records)
    assert [key for key, _ in records] == [bytes((HISTORY_EVENTS,)) + _history_key(1, n) for n in (1, 3, 5, 7)]
    assert _restored(records) == writes


def test_records_of_the_old_layout_restore_as_before():
    old = [(changelog_key(Family.WORKFLOW_HISTORY, _history_key(2, 1)), b"e1"),
           (changelog_key(Family.WORKFLOW_TIMERS, b"t"), None)]
    assert _restored(old) == {(Family.WORKFLOW_HISTORY, _history_key(2, 1)): b"e1",
                              (Family.WORKFLOW_TIMERS, b"t"): None}


# A takeover across the layouts, on a real broker -----------------------------------------------

QUEUE = "layout"


@activity.defn
def shout(text: str) -> str:
    return text.upper()


@workflow.defn
class WaitsThenSteps:
    def __init__(self) -> None:
        self.words: list[str] = []

    @workflow.run
    async def run(self, first: str) -> str:
        said = [await workflow.execute_local_activity(shout, first, start_to_close_timeout=timedelta(seconds=10))]
        await workflow.wait_condition(lambda: bool(self.words))
        said.append(await workflow.execute_activity(shout, self.words[0], start_to_close_timeout=timedelta(seconds=10)))
        return " ".join(said)

    @workflow.signal
    def word(self, text: str) -> None:
        self.words.append(text)


def _one_record_per_write(writes):
    return [(changelog_key(family, key), value) for (family, key), value in writes.items()]


@pytest.mark.kafka
def test_an_engine_takes_over_a_changelog_written_one_record_per_event(bootstrap, namespace, tmp_path, monkeypatch):
    def settings(engine_id: str) -> Settings:
        return Settings(bootstrap=bootstrap, namespace=namespace, partitions=2, state_dir=tmp_path / engine_id,
                        engine_id=engine_id)

    with Client(bootstrap, namespace) as client:
        # An engine of the old layout starts the runs and leaves them waiting for a signal.
        monkeypatch.setattr(batch_writer, "changelog_records", _one_record_per_write)
        with EngineThread(settings("old"), clock=ManualClock(), idle_poll_ms=10), \
                Worker(client, task_queue=QUEUE, workflows=[WaitsThenSteps], activities=[shout], identity="w1"):
            handles = [client.start_workflow(WaitsThenSteps.run, f"hello {n}", id=f"layout-{n}", task_queue=QUEUE)
                       for n in range(4)]
            for handle in handles:
                _wait_for_marker(handle)
        monkeypatch.undo()
        # A new engine with no local state: the old records, then its own.
        with EngineThread(settings("new"), clock=ManualClock(), idle_poll_ms=10) as engine, \
                Worker(client, task_queue=QUEUE, workflows=[WaitsThenSteps], activities=[shout], identity="w2"):
            assert engine.stats.restored_records > 0
            for n, handle in enumerate(handles):
                handle.signal(WaitsThenSteps.word, f"world {n}")
            assert [h.result(60) for h in handles] == [f"HELLO {n} WORLD {n}" for n in range(4)]
        # And another, restoring the changelog of both layouts.
        with EngineThread(settings("newer"), clock=ManualClock(), idle_poll_ms=10):
            for handle in handles:
                events = handle.fetch_history().events
                assert [e["event_id"] for e in events] == list(range(1, len(events) + 1))
                assert check_well_formed([(e["event_id"], EventType[e["event_type"]], e["attributes"])
                                          for e in events]) == []
                assert events[-1]["event_type"] == "WORKFLOW_EXECUTION_COMPLETED"


@pytest.mark.kafka
def test_an_engine_takes_over_jobs_whose_due_dates_an_engine_from_before_put_on_the_changelog(
        bootstrap, namespace, tmp_path, monkeypatch):
    def settings(engine_id: str) -> Settings:
        return Settings(bootstrap=bootstrap, namespace=namespace, partitions=2, state_dir=tmp_path / engine_id,
                        engine_id=engine_id)

    clock = ManualClock()
    events = EventLog(bootstrap, namespace)
    try:
        with Client(bootstrap, namespace) as client:
            # An engine from before starts three jobs: one runs on, one fails with a backoff, one completes.
            monkeypatch.setattr(batch_writer, "changelog_records", _one_record_per_write)
            with EngineThread(settings("old"), clock=clock, idle_poll_ms=10):
                for n in range(3):
                    client.create_job("layout-jobs", {"n": n}, timeout=timedelta(seconds=10))
                events.read_until(lambda e: e.count("CREATED") == 3, 60)
                running, backing_off, done = sorted(e.key for e in events.events(intent="CREATED"))
                for key in (running, backing_off, done):
                    client.start_job(key, 1, "w1")
                events.read_until(lambda e: e.count("STARTED") == 3, 60)
                client.fail_job(backing_off, 1, retries=2, retry_backoff=timedelta(seconds=20))
                client.complete_job(done, 1, result=None)
                events.read_until(lambda e: e.count("FAILED") == 1 and e.count("COMPLETED") == 1, 60)
            monkeypatch.undo()
            # A new engine with no local state restores them: what was due comes due.
            with EngineThread(settings("new"), clock=clock, idle_poll_ms=10) as engine:
                assert engine.stats.restored_records > 0
                clock.advance(timedelta(seconds=10, milliseconds=1))
                events.read_until(lambda e: e.count("TIMED_OUT") == 1, 60)
                clock.advance(timedelta(seconds=10))
                events.read_until(lambda e: e.count("RECURRED_AFTER_BACKOFF") == 1, 60)
                events.read_available()
        assert [e.key for e in events.events(intent="TIMED_OUT")] == [running]
        assert [e.key for e in events.events(intent="RECURRED_AFTER_BACKOFF")] == [backing_off]
        assert events.rejections() == []
    finally:
        events.close()


@pytest.mark.kafka
def test_a_local_copy_an_engine_from_before_left_is_rebuilt_with_its_derived_indexes(
        bootstrap, namespace, tmp_path, monkeypatch):
    """An engine from before may stop half way through a restore, between a job's document and
    its deadline's record (both on its changelog): its copy then holds the document without
    the deadline. A new engine resuming that copy from its checkpoint would skip the
    deadline's record (the document says it) and the job would never time out; a copy without
    this engine's layout is rebuilt from the changelog instead."""
    settings = Settings(bootstrap=bootstrap, namespace=namespace, partitions=1, state_dir=tmp_path,
                        engine_id="upgraded")
    clock = ManualClock()
    events = EventLog(bootstrap, namespace)
    try:
        with Client(bootstrap, namespace) as client:
            monkeypatch.setattr(batch_writer, "changelog_records", _one_record_per_write)
            monkeypatch.setattr(db_module, "STATE_LAYOUT", None)  # its checkpoints say no layout
            with EngineThread(settings, clock=clock, idle_poll_ms=10):
                client.create_job("layout-gap", {"n": 1}, timeout=timedelta(seconds=10))
                events.read_until(lambda e: e.count("CREATED") == 1, 60)
                (key,) = [e.key for e in events.events(intent="CREATED")]
                client.start_job(key, 1, "w1")
                events.read_until(lambda e: e.count("STARTED") == 1, 60)
            (path,) = tmp_path.glob("*/partition-*")
            db = db_module.PartitionDb(path, 0)
            try:  # the copy as that engine left it, stopped between the two records
                deadlines = [k for k, _ in db.scan(Family.JOB_DEADLINES)]
                assert len(deadlines) == 1
                db.apply({(Family.JOB_DEADLINES, deadlines[0]): None}, db.checkpoint())
            finally:
                db.close()
            monkeypatch.undo()
            with EngineThread(settings, clock=clock, idle_poll_ms=10) as engine:
                assert engine.stats.restored_records > 0  # rebuilt, not resumed at its end
                clock.advance(timedelta(seconds=10, milliseconds=1))
                events.read_until(lambda e: e.count("TIMED_OUT") == 1, 60)
        assert events.rejections() == []
    finally:
        events.close()


def _wait_for_marker(handle, timeout: float = 60) -> None:
    import time

    deadline = time.monotonic() + timeout
    while "MARKER_RECORDED" not in [e["event_type"] for e in handle.fetch_history().events]:
        if time.monotonic() > deadline:
            raise AssertionError(f"{handle.id} recorded no marker within {timeout} s")
        time.sleep(0.1)
