"""Schedule specs: compile the input form, and compute action times (SEMANTICS.md 8.1-8.5).

``compile_spec`` takes the JSON form a command carries (snake_case of Temporal's
``ScheduleSpec``), turns calendar strings and cron strings into structured calendars and
intervals, validates everything with Temporal's messages, and returns a ``CompiledSpec``,
whose ``to_dict`` is what Describe shows. ``next_action_time`` is Temporal's
``GetNextTime``; all times are integer Unix epoch milliseconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from streamproc.semantics.errors import ScheduleSpecError
from streamproc.semantics.schedule_calendar import (
    StructuredCalendar,
    parse_calendar_strings,
    structured_calendar_from_dict,
    validate_structured_calendar,
)
from streamproc.semantics.schedule_cron import parse_cron_string
from streamproc.semantics.schedule_interval import IntervalSpec, interval_from_dict
from streamproc.semantics.schedule_jitter import jitter_ms
from streamproc.semantics.schedule_search import CalendarMatcher
from streamproc.semantics.schedule_zone import load_zone, matches_at, next_match

__all__ = [
    "ActionTime",
    "CompiledSpec",
    "IntervalSpec",
    "ScheduleSpecError",
    "StructuredCalendar",
    "action_times",
    "compile_spec",
    "next_action_time",
]

#: 2101-01-01T00:00:00Z: no action time lies in or after year 2101 (Temporal's bound).
_END_OF_CALENDAR_S = 4_133_980_800
#: Temporal only warns when excludes reject this many times in a row; a spec whose
#: excludes swallow everything would otherwise spin until 2100, so it ends here instead
#: (Temporal's own hard bound, off by default, does the same: "treated as the end").
_MAX_EXCLUDED_IN_A_ROW = 86_400


@dataclass(frozen=True)
class ActionTime:
    nominal_ms: int
    actual_ms: int  # nominal plus the deterministic jitter


@dataclass(frozen=True)
class CompiledSpec:
    """The compiled spec: what a schedule stores and Describe shows (ranges cleaned)."""

    calendars: tuple[StructuredCalendar, ...] = ()
    intervals: tuple[IntervalSpec, ...] = ()
    excludes: tuple[StructuredCalendar, ...] = ()
    start_ms: int | None = None
    end_ms: int | None = None
    jitter_ms: int = 0
    timezone_name: str = ""

    def to_dict(self) -> dict:
        return {
            "structured_calendar": [c.to_dict() for c in self.calendars],
            "interval": [i.to_dict() for i in self.intervals],
            "exclude_structured_calendar": [c.to_dict() for c in self.excludes],
            "start_time_ms": self.start_ms,
            "end_time_ms": self.end_ms,
            "jitter_ms": self.jitter_ms,
            "timezone_name": self.timezone_name,
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> CompiledSpec:
        """Read back a ``to_dict`` output without validating it again."""
        return cls(
            calendars=tuple(structured_calendar_from_dict(c).cleaned() for c in d.get("structured_calendar") or ()),
            intervals=tuple(interval_from_dict(i) for i in d.get("interval") or ()),
            excludes=tuple(structured_calendar_from_dict(c).cleaned()
                           for c in d.get("exclude_structured_calendar") or ()),
            start_ms=d.get("start_time_ms"),
            end_ms=d.get("end_time_ms"),
            jitter_ms=int(d.get("jitter_ms") or 0),
            timezone_name=d.get("timezone_name") or "",
        )

    # The search structures, built on first use (frozen dataclasses allow cached_property).
    @cached_property
    def _zone(self):
        return load_zone(self.timezone_name)

    @cached_property
    def _calendar_matchers(self) -> tuple[CalendarMatcher, ...]:
        return tuple(CalendarMatcher(c) for c in self.calendars)

    @cached_property
    def _exclude_matchers(self) -> tuple[CalendarMatcher, ...]:
        return tuple(CalendarMatcher(c) for c in self.excludes)

    def raw_next_s(self, after_s: int) -> int | None:
        """The first calendar or interval match strictly after ``after_s`` (no excludes,
        no bounds, no jitter), in Unix seconds."""
        best = None
        for matcher in self._calendar_matchers:
            found = next_match(matcher, self._zone, after_s)
            if found is not None and (best is None or found < best):
                best = found
        for interval in self.intervals:
            found = interval.next_after(after_s)
            if best is None or found < best:
                best = found
        return best

    def excluded(self, unix_s: int) -> bool:
        return any(matches_at(m, self._zone, unix_s) for m in self._exclude_matchers)


def _list(spec: Mapping, key: str) -> list:
    value = spec.get(key)
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise ScheduleSpecError(f"{key} must be a list, got {value!r}")
    return list(value)


def _optional_ms(spec: Mapping, key: str) -> int | None:
    value = spec.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScheduleSpecError(f"{key} must be integer epoch milliseconds, got {value!r}")
    return value


def _unique(items: list) -> tuple:
    # Temporal drops repeats, so describe-then-update does not pile up copies.
    return tuple(dict.fromkeys(items))


def compile_spec(spec: Mapping) -> CompiledSpec:
    """Compile and validate, in Temporal's order; raises ``ScheduleSpecError``."""
    if not isinstance(spec, Mapping):
        raise ScheduleSpecError(f"spec must be an object, got {spec!r}")
    calendars = [structured_calendar_from_dict(c) for c in _list(spec, "structured_calendar")]
    excludes = [structured_calendar_from_dict(c) for c in _list(spec, "exclude_structured_calendar")]
    for key, target in (("calendar", calendars), ("exclude_calendar", excludes)):
        for value in _list(spec, key):
            if not isinstance(value, Mapping):
                raise ScheduleSpecError(f"{key} entries must be objects, got {value!r}")
            target.append(parse_calendar_strings(value))
    intervals = [interval_from_dict(i) for i in _list(spec, "interval")]

    cron_timezones: set[str] = set()
    for cron in _list(spec, "cron_string"):
        if not isinstance(cron, str):
            raise ScheduleSpecError(f"cron_string entries must be strings, got {cron!r}")
        parsed = parse_cron_string(cron)
        cron_timezones.add(parsed.timezone_name)
        if len(cron_timezones) > 1:
            # All cron strings must agree on their time zone, present or not.
            raise ScheduleSpecError("conflicting timezone names")
        if parsed.calendar is not None:
            calendars.append(parsed.calendar)
        if parsed.interval is not None:
            intervals.append(parsed.interval)

    timezone_name = spec.get("timezone_name") or ""
    if not isinstance(timezone_name, str):
        raise ScheduleSpecError(f"timezone_name must be a string, got {timezone_name!r}")
    cron_timezone = next(iter(cron_timezones), "")
    if cron_timezone:
        if timezone_name and timezone_name != cron_timezone:
            raise ScheduleSpecError("conflicting timezone names")
        timezone_name = cron_timezone

    for calendar in calendars:
        validate_structured_calendar(calendar)
    for interval in intervals:
        interval.validate()
    load_zone(timezone_name)

    jitter = spec.get("jitter_ms") or 0
    if isinstance(jitter, bool) or not isinstance(jitter, int):
        raise ScheduleSpecError(f"jitter_ms must be integer milliseconds, got {jitter!r}")
    return CompiledSpec(
        calendars=_unique([c.cleaned() for c in calendars]),
        intervals=_unique(intervals),
        excludes=_unique([c.cleaned() for c in excludes]),
        start_ms=_optional_ms(spec, "start_time_ms"),
        end_ms=_optional_ms(spec, "end_time_ms"),
        jitter_ms=jitter,
        timezone_name=timezone_name,
    )


def next_action_time(spec: CompiledSpec, seed: str, after_ms: int) -> ActionTime | None:
    """The first action strictly after ``after_ms`` (Temporal's ``GetNextTime``), or ``None``.

    ``seed`` is ``"<namespace>-<schedule id>"``; it only moves the jitter.
    """
    found = _next_action_time(spec, seed, after_ms)
    return None if found is _GAVE_UP else found


#: `_next_action_time` met too many excluded times in a row: a later start may find one.
_GAVE_UP = ActionTime(-1, -1)


def _next_action_time(spec: CompiledSpec, seed: str, after_ms: int) -> ActionTime | None:
    """`next_action_time`, telling the end of the spec (None) from a search given up (_GAVE_UP)."""
    # start_time is inclusive: search from one second before it (unset = the epoch).
    after_ms = max(after_ms, (spec.start_ms or 0) - 1000)
    after_s = after_ms // 1000  # Go's Time.Unix(): whole seconds, rounded down
    for _ in range(_MAX_EXCLUDED_IN_A_ROW):
        nominal = spec.raw_next_s(after_s)
        if (nominal is None or nominal >= _END_OF_CALENDAR_S
                or (spec.end_ms is not None and nominal * 1000 > spec.end_ms)):
            return None
        if not spec.excluded(nominal):
            break
        after_s = nominal
    else:
        return _GAVE_UP
    # Jitter never pushes an action past the next nominal time, excluded or not.
    max_jitter_ms = spec.jitter_ms
    if max_jitter_ms > 0:
        following = spec.raw_next_s(nominal)
        if following is not None:
            max_jitter_ms = min(max_jitter_ms, (following - nominal) * 1000)
    return ActionTime(nominal * 1000, nominal * 1000 + jitter_ms(seed, nominal, max_jitter_ms))


def action_times(spec: CompiledSpec, seed: str, after_ms: int, *, limit: int,
                 until_ms: int | None = None) -> list[ActionTime]:
    """Up to ``limit`` actions after ``after_ms``, each found from the previous *jittered*
    time (8.4 step 5), stopping before the first whose actual time is after ``until_ms``."""
    return action_times_and_beyond(spec, seed, after_ms, limit=limit, until_ms=until_ms)[0]


def action_times_and_beyond(spec: CompiledSpec, seed: str, after_ms: int, *, limit: int,
                            until_ms: int | None = None) -> tuple[list[ActionTime], Beyond | None]:
    """`action_times`, and where the search stopped: the first action after ``until_ms``
    with the time it was searched from (None if it stopped at ``limit`` or found none), a
    hint for `next_action_time_after`."""
    times: list[ActionTime] = []
    while len(times) < limit:
        found = _next_action_time(spec, seed, after_ms)
        if found is _GAVE_UP:
            return times, None
        if found is None or (until_ms is not None and found.actual_ms > until_ms):
            return times, (after_ms, found)
        times.append(found)
        after_ms = found.actual_ms
    return times, None


#: The first action after a time (None: the spec has none), with that time
#: (`action_times_and_beyond`).
Beyond = tuple[int, "ActionTime | None"]


def next_action_time_after(spec: CompiledSpec, seed: str, after_ms: int, beyond: Beyond | None) -> ActionTime | None:
    """`next_action_time(spec, seed, after_ms)`, without searching again when ``beyond`` is
    the answer: the first action after a time no later than ``after_ms``, whose nominal
    second is after ``after_ms``'s, is the first after ``after_ms`` too (the search goes by
    nominal seconds, and the jitter depends on the nominal time only); and when the spec
    had none after the earlier time, it has none after a later one."""
    if beyond is not None:
        searched_after_ms, found = beyond
        if searched_after_ms <= after_ms and (
                found is None
                or found.nominal_ms // 1000 > max(after_ms, (spec.start_ms or 0) - 1000) // 1000):
            return found
    return next_action_time(spec, seed, after_ms)
