"""Which partition a client's new jobs go to: the same one for a short while, then the next.

A job's later commands (the worker's START and COMPLETE) follow its key to the partition
that created it, so where a CREATE goes decides where the job's whole life is written. An
engine commits every owned partition's work of a pass in one transaction, and each
partition it touches is written on its events and changelog partitions: a transaction
costs the broker per partition written (a produce, its KIP-890 verification, a commit
marker, the fetches the marker wakes). Jobs spread evenly over 4 partitions make the jobs
of one pass touch up to 4 of each; jobs created close together on one partition touch one.

So a client without a routing key sends its new jobs to one partition for `period_ms` or
`per_partition` jobs, whichever ends first, then to the next, round the partitions (Kafka's
sticky partitioner, KIP-480, for the same reason). Over more than a period the partitions
get the same share; within one, one partition takes a client's flow.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

#: How long new jobs stay on one partition: a job's three commands, at a light paced rate, fall
#: within it, so one pass's commands are of one partition.
PERIOD_MS = 100
#: And at most this many, so that a burst is still spread over every partition.
PER_PARTITION = 64


class StickyPartitions:
    def __init__(self, period_ms: float = PERIOD_MS, per_partition: int = PER_PARTITION,
                 monotonic: Callable[[], float] = time.monotonic, first: int | None = None) -> None:
        self._period_s = period_ms / 1000
        self._per_partition = per_partition
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._partition = random.randrange(1 << 16) if first is None else first
        self._taken = 0
        self._until = float("-inf")

    def next(self, partitions: int) -> int:
        """The partition of the next new job, of `partitions`."""
        with self._lock:
            now = self._monotonic()
            if now >= self._until or self._taken >= self._per_partition:
                if self._until != float("-inf"):
                    self._partition += 1
                self._taken, self._until = 0, now + self._period_s
            self._taken += 1
            return self._partition % partitions
