"""When heartbeat details are sent, as Temporal's SDKs decide.

An activity may call ``heartbeat()`` in a tight loop; the engine needs to hear from it
only often enough to keep the heartbeat timeout from firing. So the first heartbeat is
sent at once, then at most one per throttle interval (0.8 x the heartbeat timeout),
the latest details replacing older unsent ones; whatever is still pending when the
attempt ends is sent before its result. Pure: time is an argument.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta

__all__ = ["throttle_interval", "HeartbeatThrottle", "HeartbeatSender", "NOTHING"]

#: Temporal's defaults: with no heartbeat timeout heartbeats still carry details and
#: fetch cancellation, every 30 s; with one, never less often than every 60 s.
DEFAULT_THROTTLE = timedelta(seconds=30)
MAX_THROTTLE = timedelta(seconds=60)


class _Nothing:
    """No details to send (distinct from details that are None)."""

    def __repr__(self) -> str:
        return "NOTHING"


NOTHING = _Nothing()


def throttle_interval(heartbeat_timeout: timedelta | None) -> timedelta:
    if heartbeat_timeout is None or heartbeat_timeout <= timedelta(0):
        return DEFAULT_THROTTLE
    return min(heartbeat_timeout * 0.8, MAX_THROTTLE)


class HeartbeatThrottle:
    """Decides, for one attempt, which recorded details go out and when.

    ``record`` and ``due`` return the details to send now, or :data:`NOTHING`;
    ``next_due`` is when pending details fall due (the caller arms a timer for it).
    Times are seconds on any monotonic clock.
    """

    def __init__(self, interval: timedelta) -> None:
        self.interval = interval.total_seconds()
        self._window_ends: float | None = None
        self._pending: object = NOTHING

    def record(self, details: object, now: float) -> object:
        if self._window_ends is None or now >= self._window_ends:
            self._pending = NOTHING
            self._window_ends = now + self.interval
            return details
        self._pending = details
        return NOTHING

    def due(self, now: float) -> object:
        """Pending details if their time has come (a new window starts with them)."""
        if self._pending is NOTHING or self._window_ends is None or now < self._window_ends:
            return NOTHING
        details, self._pending = self._pending, NOTHING
        self._window_ends = now + self.interval
        return details

    @property
    def next_due(self) -> float | None:
        return None if self._pending is NOTHING else self._window_ends

    def take_pending(self) -> object:
        """What the attempt still has to send before its result, if anything."""
        details, self._pending = self._pending, NOTHING
        return details


class HeartbeatSender:
    """Applies a throttle for one running attempt: sends at once from the caller's thread,
    or later from a timer thread when the window ends, through `send`.

    Sends happen under one lock, and none after `close()`, so the attempt's answer,
    sent after `close()` and the details it returns, always comes last.
    """

    def __init__(self, interval: timedelta, send: Callable[[object], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._throttle = HeartbeatThrottle(interval)
        self._send = send
        self._clock = clock
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._closed = False

    def record(self, details: object) -> None:
        with self._lock:
            if self._closed:
                return
            due = self._throttle.record(details, self._clock())
            if due is NOTHING:
                self._arm_timer()
            else:
                self._send(due)

    def close(self) -> object:
        """Stop sending; the details still pending (to send before the answer), or NOTHING."""
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            return self._throttle.take_pending()

    def _arm_timer(self) -> None:
        next_due = self._throttle.next_due
        if self._timer is not None or next_due is None:
            return
        self._timer = threading.Timer(max(0.0, next_due - self._clock()), self._on_timer)
        self._timer.daemon = True
        self._timer.start()

    def _on_timer(self) -> None:
        with self._lock:
            self._timer = None
            if self._closed:
                return
            due = self._throttle.due(self._clock())
            if due is NOTHING:
                self._arm_timer()  # woke a hair early
            else:
                self._send(due)
