"""Which offsets of a task queue an activity worker may commit: only past tasks the engine
has answered the START of.

A task taken from Kafka is not safe until its START is on the engine's side: a worker
killed between committing a task's offset and sending START would lose the attempt for
good (nothing in the engine times out a dispatched attempt nobody started; that is the
broker's redelivery to cover). So the worker stores, per partition, the offset below
which every task's START was answered (accepted, refused or given up on), and the
consumer's auto-commit commits only that. A task redelivered after a crash sends START
again, and the engine refuses it if the first one got there.
"""

from __future__ import annotations

import threading

__all__ = ["TaskOffsets"]


class TaskOffsets:
    """Thread-safe: tasks are taken on the polling thread and settled on attempt threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: partition -> offsets taken whose START is not answered yet
        self._unsettled: dict[int, set[int]] = {}
        #: partition -> the offset after the last task taken
        self._next: dict[int, int] = {}
        #: partition -> the committable offset last handed out
        self._stored: dict[int, int] = {}

    def taken(self, partition: int, offset: int) -> None:
        with self._lock:
            self._unsettled.setdefault(partition, set()).add(offset)
            self._next[partition] = max(self._next.get(partition, 0), offset + 1)

    def skipped(self, partition: int, offset: int) -> None:
        """A record that is not a task to run (undecodable...): nothing to wait for."""
        with self._lock:
            self._next[partition] = max(self._next.get(partition, 0), offset + 1)

    def settled(self, partition: int, offset: int) -> None:
        """The task's START was answered (or given up on): redelivering it is no longer needed."""
        with self._lock:
            self._unsettled.get(partition, set()).discard(offset)

    def unsettled(self, partition: int, offset: int) -> bool:
        """Whether a task taken is still waiting for its START's answer (not forgotten)."""
        with self._lock:
            return offset in self._unsettled.get(partition, ())

    def committable(self) -> dict[int, int]:
        """Partition -> offset to commit, for the partitions whose offset moved since last asked."""
        with self._lock:
            out = {}
            for partition, after_last in self._next.items():
                unsettled = self._unsettled.get(partition)
                offset = min(unsettled) if unsettled else after_last
                if self._stored.get(partition) != offset:
                    out[partition] = self._stored[partition] = offset
            return out

    def forget(self, partitions: set[int]) -> None:
        """Partitions this worker no longer owns: their tasks are the next owner's to redeliver."""
        with self._lock:
            for partition in partitions:
                self._unsettled.pop(partition, None)
                self._next.pop(partition, None)
                self._stored.pop(partition, None)
