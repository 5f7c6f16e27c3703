"""The changelog leaves out the run deadlines' index (each workflow task moved it: two
records a task), and a restore rebuilds it from the run documents: the state restored,
in one go, in chunks, or on top of an earlier copy, is the state the engine wrote. A
changelog from before, which carried the index, restores the same."""

from __future__ import annotations

from streamproc.kafka.changelog import changelog_key
from streamproc.state.db import PartitionDb
from streamproc.state.families import Family
from streamproc.state.workflow_timers import WorkflowDueDates
from tests.engine.restore import restore_records, state_of
from tests.engine.test_workflow_task_hand_back import COMPLETE, FORCE, MARKER, RETURN, answer
from tests.engine.workflow_driver import S

DRIVER_OPTIONS = {"start_ms": 1_000_000}


def _check_restores(d, tmp_path, name: str) -> None:
    records = d.h.changelog
    for chunk in (1, 3, len(records)):
        db = restore_records(PartitionDb(tmp_path / f"{name}-{chunk}", 0), records, chunk)
        try:
            assert state_of(db) == state_of(d.h.db), f"restored in chunks of {chunk}"
        finally:
            db.close()
    # On top of a copy restored up to the middle, as a restart with a local checkpoint does.
    half = len(records) // 2
    db = restore_records(restore_records(PartitionDb(tmp_path / f"{name}-halves", 0), records[:half], 2), records[half:], 5)
    try:
        assert state_of(db) == state_of(d.h.db), "restored on top of a copy"
    finally:
        db.close()


def _deadline_records(records) -> list:
    return [key for key, _ in records if key[0] == Family.WORKFLOW_DEADLINES]


def test_a_checkpointed_step_writes_no_deadline_records_and_the_index_restores(d, tmp_path):
    key, _ = d.start()
    for _ in range(3):
        d.clock.advance(7)
        answer(d, key, [MARKER], {**FORCE, **RETURN})
    assert d.run(key)["deadlines"], "a task is out: its timeout is armed"
    assert d.h.db.count(Family.WORKFLOW_DEADLINES) == 1  # the engine's own copy keeps the index
    assert _deadline_records(d.h.changelog) == []
    _check_restores(d, tmp_path, "open")
    answer(d, key, [COMPLETE])
    assert d.h.db.count(Family.WORKFLOW_DEADLINES) == 0
    _check_restores(d, tmp_path, "closed")


def test_timeouts_retries_and_backoffs_restore_their_deadlines(d, tmp_path):
    # A task timed out and scheduled again, a run timeout, a retry run in its backoff.
    key, _ = d.start(workflow_run_timeout_ms=30 * S, retry_policy={"initial_interval_ms": 5 * S,
                                                                     "maximum_attempts": 3})
    d.run_until(d.clock.now_ms() + 11 * S)
    _check_restores(d, tmp_path, "task-timed-out")
    d.run_until(d.clock.now_ms() + 20 * S)
    retry_key = d.current_key("w1")
    assert retry_key != key and "BACKOFF_START" in d.run(retry_key)["deadlines"]
    _check_restores(d, tmp_path, "backoff")
    d.run_until(d.clock.now_ms() + 6 * S)
    assert "BACKOFF_START" not in d.run(retry_key)["deadlines"]
    _check_restores(d, tmp_path, "retry-running")
    assert _deadline_records(d.h.changelog) == []
    # What was restored comes due: the restored copy's checker finds the retry's task and run timeouts.
    db = restore_records(PartitionDb(tmp_path / "due", 0), d.h.changelog, 1000)
    try:
        due = WorkflowDueDates(db).deadlines(d.clock.now_ms() + 3600 * S, 10)
        assert [(run_key, kind) for _, run_key, kind in due] == [(retry_key, "TASK_TIME_OUT"),
                                                                  (retry_key, "RUN_TIME_OUT")]
    finally:
        db.close()


def test_a_changelog_from_before_with_the_index_on_it_restores_the_same(d, tmp_path):
    key, _ = d.start()
    d.clock.advance(7)
    answer(d, key, [MARKER], {**FORCE, **RETURN})
    # An engine from before wrote the index too (a tombstone and a put per task): here, a
    # stale put the documents contradict and the live one, both skipped.
    stale = changelog_key(Family.WORKFLOW_DEADLINES, b"\x00" * 16 + b"TASK_TIME_OUT")
    live = [changelog_key(Family.WORKFLOW_DEADLINES, k) for k, _ in d.h.db.scan(Family.WORKFLOW_DEADLINES)]
    d.h.changelog[1:1] = [(stale, b""), *((k, b"") for k in live)]
    _check_restores(d, tmp_path, "old")
