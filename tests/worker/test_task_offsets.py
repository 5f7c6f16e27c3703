"""TaskOffsets: an activity worker commits a task queue only past tasks whose START was answered."""

from __future__ import annotations

import random

from streamproc.worker.task_offsets import TaskOffsets


def test_nothing_is_committable_past_a_task_whose_start_is_unanswered():
    offsets = TaskOffsets()
    for offset in (10, 11, 12):
        offsets.taken(0, offset)
    assert offsets.committable() == {0: 10}
    offsets.settled(0, 11)
    offsets.settled(0, 12)
    assert offsets.committable() == {}          # still held at 10: 10 may be lost with the worker
    offsets.settled(0, 10)
    assert offsets.committable() == {0: 13}


def test_skipped_records_move_the_offset_and_partitions_are_independent():
    offsets = TaskOffsets()
    offsets.taken(0, 3)
    offsets.skipped(1, 7)
    assert offsets.committable() == {0: 3, 1: 8}
    offsets.skipped(0, 4)
    assert offsets.committable() == {}
    offsets.settled(0, 3)
    assert offsets.committable() == {0: 5}


def test_a_revoked_partition_is_forgotten_and_late_settlements_are_harmless():
    offsets = TaskOffsets()
    offsets.taken(2, 5)
    offsets.forget({2})
    offsets.settled(2, 5)
    assert offsets.committable() == {}
    offsets.taken(2, 9)                         # assigned again later: starts afresh
    assert offsets.committable() == {2: 9}


def test_the_committable_offset_never_passes_an_unsettled_task_whatever_the_order():
    rng = random.Random(4)
    for _ in range(200):
        offsets = TaskOffsets()
        taken = list(range(rng.randint(1, 30)))
        for offset in taken:
            offsets.taken(0, offset)
        unsettled = set(taken)
        committed = 0
        for offset in rng.sample(taken, len(taken)):
            offsets.settled(0, offset)
            unsettled.discard(offset)
            committed = offsets.committable().get(0, committed)
            assert committed == (min(unsettled) if unsettled else len(taken))
