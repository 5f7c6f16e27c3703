"""Time as an injected dependency: processors and checkers never read the system clock."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int: ...


class SystemClock:
    """Wall-clock time in epoch milliseconds."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to: tests jump hours ahead without sleeping.

    Thread-safe, because an engine thread reads it while the test thread advances it.
    """

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = start_ms
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        with self._lock:
            return self._now_ms

    def advance(self, delta: timedelta | int) -> int:
        """Move forward by a timedelta or by milliseconds; returns the new time."""
        ms = int(delta.total_seconds() * 1000) if isinstance(delta, timedelta) else int(delta)
        if ms < 0:
            raise ValueError(f"a clock only moves forward, got {ms} ms")
        with self._lock:
            self._now_ms += ms
            return self._now_ms

    def set(self, now_ms: int) -> None:
        with self._lock:
            if now_ms < self._now_ms:
                raise ValueError(f"a clock only moves forward: {now_ms} < {self._now_ms}")
            self._now_ms = now_ms


class SkippingClock:
    """Wall-clock time plus an offset that only grows: the time-skipping test environment's
    clock. It runs in real time (an activity still times out after its real timeout) and
    jumps ahead when told to (`skip_to`), never back. Thread-safe: the engine thread
    reads it while the environment moves it."""

    def __init__(self) -> None:
        self._offset_ms = 0
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        with self._lock:
            return time.time_ns() // 1_000_000 + self._offset_ms

    def skip_to(self, at_ms: int) -> int:
        """Jump to `at_ms` if it is ahead (else stay); returns the time now."""
        with self._lock:
            now = time.time_ns() // 1_000_000 + self._offset_ms
            if at_ms > now:
                self._offset_ms += at_ms - now
                now = at_ms
            return now

    @property
    def skipped_ms(self) -> int:
        """How far ahead of the wall clock this clock is."""
        with self._lock:
            return self._offset_ms
