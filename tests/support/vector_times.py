"""The instant the semantics vectors (SEMANTICS.md) start at, and the units they count in."""

from datetime import datetime, timedelta, timezone

T = datetime(2026, 5, 4, tzinfo=timezone.utc)
S = timedelta(seconds=1)
M = timedelta(minutes=1)
H = timedelta(hours=1)
NONE = timedelta(0)
