"""The deadlines of local activity attempts that run a plain function on the runner's pool.

Such an attempt is handed to the pool by the thread that starts it and settles its outcome
on the pool's thread when the function returns: no hop through the runner's event loop
(`local_activity_runner`). Only its timeout needs a clock that fires while the function
may still run, and that is this watch, on the runner's loop: it sleeps until the earliest
deadline it knows of and is woken from another thread only when an attempt brings an
earlier one. Attempts with the same timeout come in deadline order, so a steady stream of
them wakes the loop about once per timeout rather than twice per attempt.

Whoever comes first decides an attempt: the function's return (`finish`) or the deadline
(`on_timeout` runs on the loop, as an `asyncio.wait` timeout did); the other is ignored.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import threading
import time
from collections.abc import Callable

__all__ = ["AttemptDeadlines", "WatchedAttempt"]

#: asyncio runs a timer this much early at most (its clock's resolution): an attempt due
#: within it is due.
_RESOLUTION_S = time.get_clock_info("monotonic").resolution
#: Finished attempts' entries are swept from the heap once there are more than this many
#: and they are over half of it.
SWEEP_AT = 64


class WatchedAttempt:
    """One attempt under watch: decided once, by its function's end or by its deadline."""

    __slots__ = ("_decided", "on_timeout")

    def __init__(self, on_timeout: Callable[[], None] | None) -> None:
        self._decided = False
        self.on_timeout = on_timeout


class AttemptDeadlines:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: (deadline on the loop's clock, order, attempt), earliest first.
        self._heap: list[tuple[float, int, WatchedAttempt]] = []
        self._order = itertools.count()
        #: The deadline the loop's current timer fires at (None: no timer), and its token:
        #: only the current timer sets the next one, so timers never multiply.
        self._armed_at: float | None = None
        self._token = 0
        #: Entries of attempts their function decided, left in the heap until swept.
        self._finished = 0

    def watch(self, loop: asyncio.AbstractEventLoop, attempt: WatchedAttempt, timeout_s: float) -> None:
        """Time `attempt` out after `timeout_s` (from any thread), unless it finishes first."""
        deadline = time.monotonic() + timeout_s  # the clock of asyncio's loops
        with self._lock:
            if attempt._decided:
                return  # its function returned already
            heapq.heappush(self._heap, (deadline, next(self._order), attempt))
            if self._armed_at is not None and self._armed_at <= deadline:
                return  # the timer that is set fires first and sets the next one
            self._armed_at = deadline
            self._token += 1
            token = self._token
        loop.call_soon_threadsafe(lambda: loop.call_at(deadline, self._expire, loop, token))

    def finish(self, attempt: WatchedAttempt) -> bool:
        """The function returned: True if that decides `attempt` (its deadline did not).
        Its entry waits for its deadline, holding nothing of the attempt's."""
        with self._lock:
            if attempt._decided:
                return False
            attempt._decided = True
            attempt.on_timeout = None
            self._finished += 1
            if self._finished > SWEEP_AT and self._finished * 2 > len(self._heap):
                # Mostly finished attempts: their entries would wait out their timeouts (an
                # hour's worth at a high rate); the armed timer finds the earliest left.
                self._heap = [entry for entry in self._heap if not entry[2]._decided]
                heapq.heapify(self._heap)
                self._finished = 0
        return True

    def _expire(self, loop: asyncio.AbstractEventLoop, token: int) -> None:
        now = loop.time() + _RESOLUTION_S
        due = []
        with self._lock:
            heap = self._heap
            while heap and (heap[0][0] <= now or heap[0][2]._decided):  # due, or finished: not to wait for
                attempt = heapq.heappop(heap)[2]
                if not attempt._decided:
                    attempt._decided = True
                    due.append(attempt)
                else:
                    self._finished -= 1
            rearm = token == self._token
            if rearm:
                self._armed_at = self._heap[0][0] if self._heap else None
                self._token += 1
                token, next_at = self._token, self._armed_at
        if rearm and next_at is not None:
            loop.call_at(next_at, self._expire, loop, token)
        for attempt in due:  # each on its own: one that raises (the loop logs it) stops no other
            loop.call_soon(attempt.on_timeout)
