"""One workflow task at a time across the threads that take them, in the order they asked.

A workflow worker takes tasks from two sources, each on a thread that blocks on its own
source (see `workflow_worker`): the task queue's consumer, and the tasks the engine hands
back on the replies partition. Workflow code, the sticky cache and the eager-activity
reservations are not made for two threads at once, so the two take turns to run what they
took. A plain lock would do that, but not fairly: a thread that releases it and asks again
at once (a run of handed-back tasks) can have it again before the other wakes up, and the
consumer thread would stop polling meanwhile (its group's `max.poll.interval.ms`). Turns
are served first come, first served (a ticket lock).
"""

from __future__ import annotations

import threading
import time

__all__ = ["TaskTurns"]


class TaskTurns:
    """`with turns:` runs the block when every thread that asked before has had its turn."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next_ticket = 0
        self._serving = 0
        #: When the turn last changed hands (monotonic): what a wait's patience runs from.
        self._changed_at = time.monotonic()
        #: Each waiting thread's own condition, by ticket: a turn wakes only the one whose it
        #: is (with 100 completions in line, waking all of them at each turn cost as much as
        #: the turns), and a wait with patience wakes at its own time to look at the line.
        self._waiters: dict[int, threading.Condition] = {}
        #: Tickets whose thread stopped waiting (interrupted): skipped when their turn comes.
        self._given_up: set[int] = set()

    def __enter__(self) -> TaskTurns:
        with self._lock:
            ticket = self._next_ticket
            self._next_ticket += 1
            try:
                while ticket != self._serving:
                    self._wait(ticket)
            except BaseException:  # e.g. KeyboardInterrupt: kept, every later turn would wait for this one
                self._given_up.add(ticket)
                self._next_turn(self._serving)
                raise
            finally:
                self._waiters.pop(ticket, None)
        return self

    def wait_turn(self, patience_s: float, deadline: float | None = None) -> bool:
        """Take a turn in line, as `with turns:` does, unless the turns stop moving: False
        (and out of line) once none has changed hands for `patience_s`, the thread that has
        it being held up (a task waiting on its local activities or on a history fetch), or
        once `deadline` (monotonic) has passed however the line moves. For work worth doing
        in its turn but not at any price (`ride_along`); leave a turn taken with `leave`."""
        with self._lock:
            ticket = self._next_ticket
            self._next_ticket += 1
            began = time.monotonic()
            try:
                while ticket != self._serving:
                    give_up = max(began, self._changed_at) + patience_s  # the line moved since: waited out
                    if deadline is not None:
                        give_up = min(give_up, deadline)
                    left = give_up - time.monotonic()
                    if left <= 0:
                        self._given_up.add(ticket)
                        return False
                    self._wait(ticket, left)
            except BaseException:  # as in `__enter__`
                self._given_up.add(ticket)
                self._next_turn(self._serving)
                raise
            finally:
                self._waiters.pop(ticket, None)
            return True

    def __exit__(self, *exc: object) -> None:
        self.leave()

    def leave(self) -> None:
        """End the turn this thread has: the next in line gets it."""
        with self._lock:
            self._next_turn(self._serving + 1)

    def _wait(self, ticket: int, timeout: float | None = None) -> None:
        """Wait (under `_lock`) until `ticket`'s turn may have come, or `timeout`."""
        waiter = self._waiters.get(ticket)
        if waiter is None:
            waiter = self._waiters[ticket] = threading.Condition(self._lock)
        waiter.wait(timeout)

    def _next_turn(self, ticket: int) -> None:
        while ticket in self._given_up:
            self._given_up.discard(ticket)
            ticket += 1
        self._serving = ticket
        self._changed_at = time.monotonic()
        waiter = self._waiters.get(ticket)
        if waiter is not None:
            waiter.notify()

    @property
    def waiting(self) -> int:
        """Threads waiting for their turn (not counting the one that has it)."""
        with self._lock:
            return max(self._next_ticket - self._serving - len(self._given_up) - 1, 0)
