"""Interval specs: ``every`` and ``phase``, aligned on the Unix epoch (SEMANTICS.md 8.3).

Unlike a cron workflow's ``@every`` (relative to the previous run), a schedule interval
matches ``epoch + n * interval + phase``: "every 6h offset 5h" fires at 05:00, 11:00,
17:00 and 23:00 UTC whenever the schedule was created.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from streamproc.semantics.errors import ScheduleSpecError

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


# Go's time.ParseDuration, plus Temporal's "d" (24 h) unit.
_UNIT_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "μs": 1_000, "ms": 1_000_000, "s": 1_000_000_000,
            "m": 60_000_000_000, "h": 3_600_000_000_000, "d": 86_400_000_000_000}
_PIECE = re.compile(r"([0-9]*)(?:\.([0-9]*))?([^0-9.]*)")


def parse_go_duration_ms(text: str) -> int:
    """``"6h"``, ``"1h30m"``, ``"1.5d"`` -> milliseconds (truncated), with Go's error words."""
    quoted = '"' + text + '"'
    rest, sign = text, 1
    if rest[:1] in ("-", "+"):
        sign, rest = (-1 if rest[0] == "-" else 1), rest[1:]
    if rest == "0":
        return 0
    if not rest:
        raise ScheduleSpecError(f"time: invalid duration {quoted}")
    total_ns = 0
    while rest:
        match = _PIECE.match(rest)
        whole, fraction, unit = match.group(1), match.group(2), match.group(3)
        if not whole and not fraction:
            raise ScheduleSpecError(f"time: invalid duration {quoted}")
        if not unit:
            raise ScheduleSpecError(f"time: missing unit in duration {quoted}")
        # The unit runs to the next digit or dot; Go reports it whole when unknown.
        if unit not in _UNIT_NS:
            raise ScheduleSpecError(f'time: unknown unit "{unit}" in duration {quoted}')
        scale = _UNIT_NS[unit]
        value_ns = int(whole or "0") * scale
        if fraction:
            value_ns += int(fraction) * scale // 10 ** len(fraction)
        total_ns += value_ns
        rest = rest[match.end():]
    total_ms = total_ns // 1_000_000  # Go's Duration.Milliseconds truncates toward zero
    return total_ms if sign > 0 else -total_ms
