"""Times and durations for people: `2026-05-04 11:00:05 UTC (3m 12s ago)`, `1h 30m`."""

from __future__ import annotations

import datetime
import time


def span(ms: int) -> str:
    """A length of time in its two largest units: 250ms, 12s, 3m 12s, 1h 30m, 7d 2h."""
    if ms < 1000:
        return f"{ms}ms"
    seconds = ms // 1000
    parts = []
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)):
        if seconds >= size or (parts and len(parts) < 2):
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
        if len(parts) == 2:
            break
    return " ".join(p for p in parts if not p.startswith("0") or p == parts[0])


def timestamp(ms: int | None, now_ms: int | None = None) -> str:
    """`ms` since the epoch as a UTC time with how long ago (or ahead) it is; "" for none."""
    if not ms or ms <= 0:
        return ""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    at = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    delta = now_ms - ms
    relative = "now" if abs(delta) < 1000 else f"{span(delta)} ago" if delta > 0 else f"in {span(-delta)}"
    return f"{at} ({relative})"
