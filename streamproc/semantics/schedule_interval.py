"""Interval specs: ``every`` and ``phase``, aligned on the Unix epoch (SEMANTICS.md 8.3).

Unlike a cron workflow's ``@every`` (relative to the previous run), a schedule interval
matches ``epoch + n * interval + phase``: "every 6h offset 5h" fires at 05:00, 11:00,
17:00 and 23:00 UTC whenever the schedule was created.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from streamproc.semantics.errors import ScheduleSpecError
from streamproc.semantics.go_duration import GoDurationError, parse_go_duration_ns

__all__ = ["IntervalSpec", "interval_from_dict", "parse_go_duration_ms"]


@dataclass(frozen=True, order=True)
class IntervalSpec:
    interval_ms: int
    phase_ms: int = 0

    def validate(self) -> None:
        """Temporal's checks, in its order and words."""
        if self.interval_ms < 1000:
            raise ScheduleSpecError("interval is too small")
        if self.phase_ms < 0:
            raise ScheduleSpecError("phase is negative")
        if self.phase_ms >= self.interval_ms:
            raise ScheduleSpecError("phase cannot be greater than Interval")

    def next_after(self, unix_s: int) -> int:
        """The first match strictly after ``unix_s``; whole seconds, Go's truncating division."""
        interval = max(self.interval_ms // 1000, 1)
        phase = max(self.phase_ms // 1000, 0)
        elapsed = unix_s - phase
        periods = abs(elapsed) // interval * (1 if elapsed >= 0 else -1)
        return (periods + 1) * interval + phase

    def to_dict(self) -> dict[str, int]:
        return {"interval_ms": self.interval_ms, "phase_ms": self.phase_ms}


def interval_from_dict(value: object) -> IntervalSpec:
    if not isinstance(value, Mapping):
        raise ScheduleSpecError(f"interval must be an object with interval_ms and phase_ms, got {value!r}")
    try:
        return IntervalSpec(int(value.get("interval_ms") or 0), int(value.get("phase_ms") or 0))
    except (TypeError, ValueError):
        raise ScheduleSpecError(f"interval_ms and phase_ms must be integers, got {dict(value)!r}") from None


def parse_go_duration_ms(text: str) -> int:
    """``"6h"``, ``"1h30m"``, ``"1.5d"`` -> milliseconds (truncated toward zero, as Go's
    Duration.Milliseconds), with Go's error words."""
    try:
        total_ns = parse_go_duration_ns(text, days=True)
    except GoDurationError as exc:
        raise ScheduleSpecError(str(exc)) from None
    total_ms = abs(total_ns) // 1_000_000
    return total_ms if total_ns >= 0 else -total_ms
