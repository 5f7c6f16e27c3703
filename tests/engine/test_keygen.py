"""The key generator reserves counters a block at a time: its state is written when a block
runs out, not in every batch, and no key is ever handed out twice."""

from __future__ import annotations

from streamproc.protocol.partitioning import counter_of_key, partition_of_key
from streamproc.state.db import PartitionDb, PendingWrites
from streamproc.state.families import Family
from streamproc.state.keygen import BLOCK, KeyGenerator
from streamproc.state.keys import u64


def _commit(db: PartitionDb, w: PendingWrites) -> dict:
    w.accept()
    written = dict(w.batch)
    db.apply(written, {"changelog_offset": 0, "written_at_ms": 0})
    w.clear()
    return written


def test_keys_count_up_and_the_state_is_written_once_per_block(tmp_path):
    db = PartitionDb(tmp_path, 3)
    w = PendingWrites(db)
    keys = KeyGenerator(w, 3)
    first = [keys.next_key() for _ in range(5)]
    assert [counter_of_key(k) for k in first] == [1, 2, 3, 4, 5] and {partition_of_key(k) for k in first} == {3}
    assert _commit(db, w) == {(Family.META, b"next_key"): u64(1 + BLOCK)}
    more = [keys.next_key() for _ in range(BLOCK - 5)]
    assert _commit(db, w) == {}  # the rest of the block: nothing to write
    assert counter_of_key(more[-1]) == BLOCK
    assert counter_of_key(keys.next_key()) == BLOCK + 1
    assert _commit(db, w) == {(Family.META, b"next_key"): u64(1 + 2 * BLOCK)}
    db.close()


def test_a_reopened_partition_starts_a_new_block_and_never_repeats_a_key(tmp_path):
    db = PartitionDb(tmp_path, 0)
    w = PendingWrites(db)
    keys = KeyGenerator(w, 0)
    handed = [keys.next_key() for _ in range(3)]
    _commit(db, w)
    reopened = KeyGenerator(PendingWrites(db), 0)  # a restart, a takeover, a rewind
    assert counter_of_key(reopened.next_key()) == 1 + BLOCK
    assert counter_of_key(handed[-1]) == 3
    db.close()


def test_a_reservation_discarded_with_its_command_is_made_again(tmp_path):
    db = PartitionDb(tmp_path, 0)
    w = PendingWrites(db)
    keys = KeyGenerator(w, 0)
    lost = keys.next_key()
    w.discard()  # the command failed: its keys were never seen
    kept = keys.next_key()
    assert kept == lost
    assert _commit(db, w) == {(Family.META, b"next_key"): u64(1 + BLOCK)}
    db.close()


def test_a_counter_stored_by_an_engine_from_before_is_where_the_next_block_starts(tmp_path):
    db = PartitionDb(tmp_path, 0)
    db.apply({(Family.META, b"next_key"): u64(42)}, {"changelog_offset": 0, "written_at_ms": 0})
    keys = KeyGenerator(PendingWrites(db), 0)
    assert counter_of_key(keys.next_key()) == 42
    db.close()
