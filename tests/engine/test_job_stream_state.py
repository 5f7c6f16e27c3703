"""Job stream state: keys, the per-queue streams read through pending writes and kept per
generation, and a restore from the changelog that gives back streams and their counts."""

from __future__ import annotations

import pytest

from streamproc.kafka.changelog import changelog_records, changelog_writes
from streamproc.state.db import PartitionDb, PendingWrites
from streamproc.state.families import Family
from streamproc.state.job_streams import JobStreamLeases, JobStreams, lease_key, read_stream_key, stream_key
from streamproc.state.jobs import Job
from tests.engine.harness import Harness
from tests.engine.restore import restore_records, state_of
from tests.engine.test_job_push import QUEUE, create, job_cmd, register, stream_cmd


@pytest.fixture
def db(tmp_path):
    database = PartitionDb(tmp_path / "db", 0)
    yield database
    database.close()


def test_stream_keys_sort_by_queue_then_stream_and_read_back():
    assert read_stream_key(stream_key("q.1", "abc/def")) == ("q.1", "abc/def")
    keys = [stream_key(q, s) for q, s in (("b", "a"), ("ab", "z"), ("a", "y"), ("a", "x"))]
    # Length first, so a queue's streams are together and no queue is a prefix of another's keys.
    assert [read_stream_key(k) for k in sorted(keys)] == [("a", "x"), ("a", "y"), ("b", "a"), ("ab", "z")]
    assert lease_key(5, "a", "x") < lease_key(6, "a", "a")


class CountingWrites(PendingWrites):
    def __init__(self, db):
        super().__init__(db)
        self.reads = 0

    def get(self, family, key):
        self.reads += 1
        return super().get(family, key)


def test_a_queue_without_streams_is_read_once_per_generation(db):
    writes = CountingWrites(db)
    streams = JobStreams(writes)
    assert streams.pick(QUEUE, 1, 0) is None
    reads = writes.reads
    for key in range(100):
        assert streams.pick(QUEUE, key, 0) is None
    assert writes.reads == reads  # dispatch on every CREATE: a dictionary lookup
    writes.committed()  # a batch written to RocksDB: read again
    assert streams.pick(QUEUE, 1, 0) is None and writes.reads == reads + 1


def test_streams_are_seen_through_pending_writes_and_dropped_with_discarded_ones(db):
    writes = PendingWrites(db)
    streams = JobStreams(writes)
    streams.register(QUEUE, "s1", "w", 3, credits=2, lease_ms=1000, now_ms=10)
    writes.accept()
    other = JobStreams(writes)  # a reader that did not write it sees it too
    assert other.pick(QUEUE, 7, 20).stream_id == "s1"
    streams.take(streams.get(QUEUE, "s1"))
    writes.discard()  # the command that took it failed
    assert streams.get(QUEUE, "s1").in_use == 0
    writes.clear()  # the batch aborted
    assert streams.get(QUEUE, "s1") is None and other.pick(QUEUE, 7, 20) is None


def test_release_counts_down_only_a_pushed_job_of_a_known_stream(db):
    writes = PendingWrites(db)
    streams = JobStreams(writes)
    s = streams.register(QUEUE, "s1", "w", 3, credits=2, lease_ms=1000, now_ms=10)
    streams.take(s)
    topic_job = Job(type=QUEUE, payload="{}", retries=1, timeout_ms=1)
    assert streams.release(topic_job) is None and s.in_use == 1
    pushed = Job(type=QUEUE, payload="{}", retries=1, timeout_ms=1, stream="s1")
    assert streams.release(pushed) == "s1" and pushed.stream is None and s.in_use == 0
    unknown = Job(type=QUEUE, payload="{}", retries=1, timeout_ms=1, stream="gone-long-ago")
    assert streams.release(unknown) == "gone-long-ago" and s.in_use == 0


def test_leases_are_due_strictly_after_their_end(db):
    writes = PendingWrites(db)
    JobStreams(writes).register(QUEUE, "s1", "w", 3, credits=2, lease_ms=1000, now_ms=10)
    writes.accept()
    writes.seal()
    db.apply(writes.committing, {"changelog_offset": 0})
    writes.committed()
    leases = JobStreamLeases(db)
    assert leases.next_end_ms() == 1010
    assert leases.expired(1010, 10) == []
    assert leases.expired(1011, 10) == [(1010, QUEUE, "s1")]


# Restore from the changelog ---------------------------------------------------------------------

def test_the_families_records_restore_as_written():
    writes = {(Family.JOB_STREAMS, stream_key(QUEUE, "s1")): b'{"in_use":1}',
              (Family.JOB_STREAM_LEASES, lease_key(99, QUEUE, "s1")): b"",
              (Family.JOB_STREAM_LEASES, lease_key(42, QUEUE, "s1")): None}
    records = changelog_records(writes)
    assert sorted(key[0] for key, _ in records) == [17, 18, 18]
    assert {w: v for key, value in records for w, v in changelog_writes(key, value)} == writes


def test_a_restore_from_the_changelog_rebuilds_streams_leases_and_their_counts(tmp_path):
    h = Harness(tmp_path / "engine")
    try:
        register(h, "a", credits=2)
        register(h, "b", credits=1, lease_ms=5_000)
        keys = [create(h, timeout_ms=60_000)[0].key for _ in range(4)]  # 3 pushed, 1 published
        h.send(job_cmd("COMPLETE", keys[0], attempt=1, result="{}"))
        h.clock.advance(5_001)
        assert [e.intent for e in h.check_due()] == ["EXPIRED"]  # b is gone, its job still started
        h.send(stream_cmd("RENEW", "a", credits=3, lease_ms=20_000))
        expected = state_of(h.db)
        assert expected[Family.JOB_STREAMS] and expected[Family.JOB_STREAM_LEASES]
        for chunk in (1, 4, len(h.changelog)):
            db = restore_records(PartitionDb(tmp_path / f"restored-{chunk}", 0), h.changelog, chunk)
            try:
                assert state_of(db) == expected, f"restored in chunks of {chunk}"
                streams = JobStreams(PendingWrites(db)).streams_of(QUEUE)
                assert {s: (v.in_use, v.credits, v.gone) for s, v in streams.items()} == {
                    s: (v.in_use, v.credits, v.gone) for s, v in JobStreams(PendingWrites(h.db)).streams_of(QUEUE).items()}
            finally:
                db.close()
        # The restored counts match the started jobs of each stream.
        started = [h.job(k).get("stream") for k in keys if h.job(k) is not None]
        live = JobStreams(PendingWrites(h.db)).streams_of(QUEUE)
        assert {s: started.count(s) for s in live} == {s: v.in_use for s, v in live.items()}
    finally:
        h.close()
