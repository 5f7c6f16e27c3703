"""Where a client's new jobs go (`client/sticky_partitions.py`), on a manual monotonic clock."""

from __future__ import annotations

import collections

from streamproc.client.sticky_partitions import StickyPartitions


class Ticks:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def test_jobs_created_within_the_period_share_a_partition():
    ticks = Ticks()
    sticky = StickyPartitions(period_ms=100, per_partition=64, monotonic=ticks, first=2)
    chosen = []
    for _ in range(10):  # 100 jobs/s: ten in 90 ms
        chosen.append(sticky.next(4))
        ticks.now += 0.009
    assert chosen == [2] * 10
    ticks.now += 0.020  # the period is over: the next partition
    assert sticky.next(4) == 3
    ticks.now += 0.100
    assert sticky.next(4) == 0  # round the partitions


def test_a_burst_is_spread_over_every_partition_evenly():
    sticky = StickyPartitions(period_ms=100, per_partition=64, monotonic=Ticks(), first=0)
    counts = collections.Counter(sticky.next(4) for _ in range(1024))  # all at one instant
    assert counts == {0: 256, 1: 256, 2: 256, 3: 256}


def test_over_many_periods_the_partitions_get_the_same_share():
    ticks = Ticks()
    sticky = StickyPartitions(period_ms=100, per_partition=64, monotonic=ticks, first=1)
    counts = collections.Counter()
    for _ in range(4000):  # 100 jobs/s for 40 s
        counts[sticky.next(4)] += 1
        ticks.now += 0.01
    assert max(counts.values()) - min(counts.values()) <= 10


def test_fewer_partitions_than_before_still_give_a_valid_one():
    sticky = StickyPartitions(monotonic=Ticks(), first=7)
    assert sticky.next(1) == 0 and sticky.next(3) == 1
