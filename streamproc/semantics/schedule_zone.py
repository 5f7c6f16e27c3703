"""Calendars in a time zone: from wall-clock matches to real instants (SEMANTICS.md 8.5).

An instant matches a calendar when its wall clock in the zone does. That one rule gives
Temporal's DST behaviour: a wall time inside a spring-forward gap is never shown by any
clock, so it is skipped; a wall time in the repeated autumn hour is shown twice, so it
fires twice, the earlier offset first.

The search walks *segments*, the stretches between two UTC-offset changes: inside one
the wall clock is the instant plus a constant, so the first matching wall time gives the
first matching instant. Offset changes are found once per zone and year by probing
``zoneinfo`` and cached; two changes less than ``_PROBE_S`` apart would be missed, which
no zone in the database has.

Known difference: the reference server's search assumes DST shifts of one hour, so in
Australia/Lord_Howe (a 30-minute shift) it fires a repeated wall time only at its second
occurrence (observed on Server 1.32.0); this module follows the rule above and fires both.
"""

from __future__ import annotations

from bisect import bisect_right
from datetime import datetime, timezone
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from streamproc.semantics.errors import ScheduleSpecError
from streamproc.semantics.schedule_search import CalendarMatcher

__all__ = ["load_zone", "next_match", "matches_at"]

#: No zone's wall clock is further than this from UTC, so no instant more than this
#: before a matching wall time can match.
_MAX_OFFSET_S = 16 * 3600
_PROBE_S = 6 * 3600


@lru_cache(maxsize=1024)
def load_zone(name: str) -> ZoneInfo | None:
    """The zone for a ``timezone_name`` (``None`` = UTC, Go's default for an empty name)."""
    if name in ("", "UTC"):
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        # Go's time.LoadLocation wording, which Temporal passes through.
        raise ScheduleSpecError(f"unknown time zone {name}") from None


def _offset(zone: ZoneInfo, instant: int) -> int:
    return int(datetime.fromtimestamp(instant, zone).utcoffset().total_seconds())


@lru_cache(maxsize=8192)
def _changes_in_year(zone: ZoneInfo, year: int) -> tuple[int, ...]:
    """Instants in the UTC year at which the zone's offset differs from the second before."""
    start = int(datetime(year, 1, 1, tzinfo=timezone.utc).timestamp())
    end = int(datetime(year + 1, 1, 1, tzinfo=timezone.utc).timestamp())
    probes = list(range(start - 1, end - 1, _PROBE_S)) + [end - 1]
    changes: list[int] = []
    before, before_offset = probes[0], _offset(zone, probes[0])
    for probe in probes[1:]:
        offset = _offset(zone, probe)
        if offset != before_offset:
            low, high = before, probe  # offset(low) = before_offset != offset(high)
            while high - low > 1:
                middle = (low + high) // 2
                if _offset(zone, middle) == before_offset:
                    low = middle
                else:
                    high = middle
            changes.append(high)
        before, before_offset = probe, offset
    return tuple(changes)


def _first_change(zone: ZoneInfo, after: int, until: int) -> int | None:
    """The first offset change in ``(after, until]``, or ``None``."""
    year = datetime.fromtimestamp(after, timezone.utc).year
    last_year = datetime.fromtimestamp(until, timezone.utc).year
    while year <= last_year:
        changes = _changes_in_year(zone, year)
        index = bisect_right(changes, after)
        if index < len(changes):
            return changes[index] if changes[index] <= until else None
        year += 1
    return None


def matches_at(matcher: CalendarMatcher, zone: ZoneInfo | None, instant: int) -> bool:
    """Whether the wall clock at ``instant`` (unix seconds) matches."""
    return matcher.matches(instant if zone is None else instant + _offset(zone, instant))


def next_match(matcher: CalendarMatcher, zone: ZoneInfo | None, after: int) -> int | None:
    """The first instant (unix seconds) strictly after ``after`` whose wall clock matches."""
    if zone is None:
        return matcher.next_wall(after + 1)
    instant = after + 1
    while True:
        # Skip ahead: every instant's wall clock is within _MAX_OFFSET_S of it, so nothing
        # before (first matching wall time reachable) - _MAX_OFFSET_S can match.
        earliest = matcher.next_wall(instant - _MAX_OFFSET_S)
        if earliest is None:
            return None
        instant = max(instant, earliest - _MAX_OFFSET_S)
        offset = _offset(zone, instant)
        wall = matcher.next_wall(instant + offset)
        if wall is None:
            return None
        candidate = wall - offset
        change = _first_change(zone, instant, candidate)
        if change is None:
            return candidate
        instant = change  # the segment ended first: search the next one from its start
