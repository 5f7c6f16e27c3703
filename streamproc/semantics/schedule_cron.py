"""Cron strings in a schedule spec: Temporal's own parser, not robfig's (SEMANTICS.md 8.2).

Five fields are ``minute hour day-of-month month day-of-week``; a sixth is the **year**
(not seconds); seven put **seconds** first. Fields use the calendar string grammar, so
``?``, ``L`` and ``W`` are errors and 7 is Sunday. ``@every 6h/5h`` becomes an interval,
``CRON_TZ=``/``TZ=`` a time zone, and text after ``#`` the calendar's comment.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamproc.semantics.errors import ScheduleSpecError
from streamproc.semantics.schedule_calendar import StructuredCalendar, parse_calendar_strings
from streamproc.semantics.schedule_interval import IntervalSpec, parse_go_duration_ms

__all__ = ["ParsedCron", "parse_cron_string"]

_DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_LAYOUTS = {
    5: ("minute", "hour", "day_of_month", "month", "day_of_week"),
    6: ("minute", "hour", "day_of_month", "month", "day_of_week", "year"),
    7: ("second", "minute", "hour", "day_of_month", "month", "day_of_week", "year"),
}


@dataclass(frozen=True)
class ParsedCron:
    """One cron string: a calendar or an interval, and its time zone ("" = none given)."""

    calendar: StructuredCalendar | None
    interval: IntervalSpec | None
    timezone_name: str


def parse_cron_string(cron: str) -> ParsedCron:
    text = cron.strip()
    timezone_name = ""
    if text.startswith(("TZ=", "CRON_TZ=")):
        prefix, space, rest = text.partition(" ")
        if not space:
            raise ScheduleSpecError("CronString has time zone but missing fields")
        text, timezone_name = rest, prefix.partition("=")[2]
    text, _, comment = text.partition("#")
    text, comment = text.strip(), comment.strip()

    if text.startswith("@every"):
        _, space, spec = text.partition(" ")
        if not space:
            raise ScheduleSpecError("CronString does not have interval after @every")
        every, _, phase = spec.partition("/")
        # An @every string never carries a time zone into the spec (Temporal drops it).
        return ParsedCron(None, IntervalSpec(parse_go_duration_ms(every),
                                             parse_go_duration_ms(phase) if phase else 0), "")

    fields = _DESCRIPTORS.get(text, text).split()
    layout = _LAYOUTS.get(len(fields))
    if layout is None:
        raise ScheduleSpecError("CronString does not have 5-7 fields")
    strings = dict(zip(layout, fields), comment=comment)
    return ParsedCron(parse_calendar_strings(strings), None, timezone_name)
