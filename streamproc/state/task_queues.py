"""The task queues a partition has admitted: which names, and how many.

A queue is admitted once, by the first accepted command that names it, and stays: its
topic exists from then on. The names live in the META family under a prefix (a queue
name is at most 200 bytes), with their count beside them, so the cap is checked with
two point reads and no scan.
"""

from __future__ import annotations

from streamproc.state.db import PendingWrites
from streamproc.state.families import Family
from streamproc.state.keys import read_u64, u64

_PREFIX = b"task_queue:"
_COUNT = b"task_queue_count"
#: Looked up once (a member's lookup on its enum class is a Python call per use).
_META = Family.META


class TaskQueues:
    def __init__(self, writes: PendingWrites) -> None:
        self._w = writes
        #: Queues found known at the writes' generation `_known_at`: a queue stays known
        #: (none is ever forgotten) unless the writes that admitted it are discarded or
        #: cleared, which changes the generation. Every workflow start asks for its queue.
        self._known: set[str] = set()
        self._known_at = -1

    def known(self, queue: str) -> bool:
        if self._known_at != self._w.generation:
            self._known.clear()
            self._known_at = self._w.generation
        if queue in self._known:
            return True
        if self._w.get(_META, _PREFIX + queue.encode()) is None:
            return False
        self._known.add(queue)
        return True

    def count(self) -> int:
        raw = self._w.get(_META, _COUNT)
        return read_u64(raw) if raw is not None else 0

    def add(self, queue: str) -> None:
        """Remember `queue` (once: a known queue changes nothing)."""
        if self.known(queue):
            return
        self._w.put(_META, _PREFIX + queue.encode(), b"")
        self._w.put(_META, _COUNT, u64(self.count() + 1))
