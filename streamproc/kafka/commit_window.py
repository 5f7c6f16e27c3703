"""How long a batch at hand collects more commands before its transaction begins.

A transaction costs the broker about the same whatever it carries (a dozen requests and
more: the produces and their verification, the offsets, the commit and its markers, the
fetches the commit wakes; docs/performance.md). The engine commits as soon as the input
at hand is processed, and while one transaction commits it processes what arrives, so
under load transactions carry more commands rather than becoming more frequent. Under a
steady but light flow, though (a few hundred commands a second), most commands arrive
between commits and each gets a transaction of its own: three per job.

With an interval, transactions begin at most that often: a batch ready sooner after the
previous transaction began waits out the rest of the interval, taking in the commands
that arrive meanwhile. A command that arrives after a quiet spell is committed at once;
one in a steady flow waits at most the interval. 0 (the default) turns it off.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class CommitWindow:
    def __init__(self, interval_ms: float = 0, monotonic: Callable[[], float] = time.monotonic) -> None:
        if interval_ms < 0:
            raise ValueError(f"the commit interval must be >= 0 ms, got {interval_ms}")
        self.interval_s = interval_ms / 1000
        self._monotonic = monotonic
        self._last_begin = float("-inf")

    def began(self) -> None:
        """A transaction began now."""
        self._last_begin = self._monotonic()

    def left_s(self) -> float:
        """Seconds a batch ready now waits before its transaction begins (0: none)."""
        if self.interval_s <= 0:
            return 0.0
        return max(0.0, self._last_begin + self.interval_s - self._monotonic())
