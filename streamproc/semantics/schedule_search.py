"""The next wall-clock time a calendar matches, found field by field.

Times here are *wall seconds*: the local date and time read as if it were UTC, counted
from 1970-01-01. ``schedule_zone`` maps them to real instants. The search advances the
outermost field that does not match (year, month, day, hour, minute, second) to its next
allowed value, the way a cron library does, so a yearly calendar costs a handful of
steps, not a scan.
"""

from __future__ import annotations

from bisect import bisect_left
from calendar import monthrange
from datetime import date

from streamproc.semantics.schedule_calendar import MAX_CALENDAR_YEAR, MIN_CALENDAR_YEAR, StructuredCalendar

__all__ = ["CalendarMatcher"]

_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_DAY = 86400


def _values(ranges, low: int, high: int) -> tuple[int, ...]:
    return tuple(sorted({v for r in ranges for v in r.values(low, high)}))


def wall_fields(wall: int) -> tuple[int, int, int, int, int, int, int]:
    """``(year, month, day, hour, minute, second, day_of_week)``; day of week 0 = Sunday."""
    days, second_of_day = divmod(wall, _DAY)
    ordinal = _EPOCH_ORDINAL + days
    d = date.fromordinal(ordinal)
    hour, rest = divmod(second_of_day, 3600)
    minute, second = divmod(rest, 60)
    return d.year, d.month, d.day, hour, minute, second, ordinal % 7


class CalendarMatcher:
    """A compiled ``StructuredCalendar`` (cleaned ranges): ``matches`` and ``next_wall``."""

    __slots__ = ("years", "months", "day_values", "days", "weekdays", "hours", "minutes", "seconds", "_year_set",
                 "_never")

    def __init__(self, calendar: StructuredCalendar) -> None:
        # An empty year list means every year; any other empty field matches nothing.
        self.years = _values(calendar.year, MIN_CALENDAR_YEAR, MAX_CALENDAR_YEAR) if calendar.year else None
        self._year_set = frozenset(self.years) if self.years is not None else None
        self.months = _values(calendar.month, 1, 12)
        self.day_values = _values(calendar.day_of_month, 1, 31)
        self.days = frozenset(self.day_values)
        self.weekdays = frozenset(_values(calendar.day_of_week, 0, 6))
        self.hours = _values(calendar.hour, 0, 23)
        self.minutes = _values(calendar.minute, 0, 59)
        self.seconds = _values(calendar.second, 0, 59)
        self._never = not (self.months and self.days and self.weekdays and self.hours and self.minutes
                           and self.seconds) or (self.years is not None and not self.years)

    def matches(self, wall: int) -> bool:
        if self._never:
            return False
        year, month, day, hour, minute, second, weekday = wall_fields(wall)
        return ((self._year_set is None or year in self._year_set) and month in self.months
                and day in self.days and weekday in self.weekdays and hour in self.hours
                and minute in self.minutes and second in self.seconds)

    def _first_day(self, year: int, month: int, day: int, last: int) -> int | None:
        """The first day >= ``day`` of the month whose date and weekday both match."""
        before_first = date(year, month, 1).toordinal() - 1
        for candidate in self.day_values[bisect_left(self.day_values, day):]:
            if candidate > last:
                return None
            if (before_first + candidate) % 7 in self.weekdays:
                return candidate
        return None

    def next_wall(self, wall: int) -> int | None:
        """The smallest matching wall time >= ``wall``, or ``None`` (none up to 2100)."""
        if self._never:
            return None
        year, month, day, hour, minute, second, _ = wall_fields(wall)
        while True:
            # Carry overflows outwards, like an odometer.
            if second >= 60:
                minute, second = minute + 1, 0
            if minute >= 60:
                hour, minute = hour + 1, 0
            if hour >= 24:
                day, hour = day + 1, 0
            if day > monthrange(year, month)[1]:
                month, day = month + 1, 1
            if month > 12:
                year, month = year + 1, 1
            if year > MAX_CALENDAR_YEAR:
                return None
            if self.years is not None and year not in self._year_set:
                index = bisect_left(self.years, year)
                if index == len(self.years):
                    return None
                year, month, day, hour, minute, second = self.years[index], 1, 1, 0, 0, 0
            index = bisect_left(self.months, month)
            if index == len(self.months):
                year, month, day, hour, minute, second = year + 1, 1, 1, 0, 0, 0
                continue
            if self.months[index] != month:
                month, day, hour, minute, second = self.months[index], 1, 0, 0, 0
            found = self._first_day(year, month, day, monthrange(year, month)[1])
            if found is None:
                year, month = (year, month + 1) if month < 12 else (year + 1, 1)
                day, hour, minute, second = 1, 0, 0, 0
                continue
            if found != day:
                day, hour, minute, second = found, 0, 0, 0
            index = bisect_left(self.hours, hour)
            if index == len(self.hours):
                day, hour, minute, second = day + 1, 0, 0, 0
                continue
            if self.hours[index] != hour:
                hour, minute, second = self.hours[index], 0, 0
            index = bisect_left(self.minutes, minute)
            if index == len(self.minutes):
                hour, minute, second = hour + 1, 0, 0
                continue
            if self.minutes[index] != minute:
                minute, second = self.minutes[index], 0
            index = bisect_left(self.seconds, second)
            if index == len(self.seconds):
                minute, second = minute + 1, 0
                continue
            second = self.seconds[index]
            days = date(year, month, day).toordinal() - _EPOCH_ORDINAL
            return days * _DAY + hour * 3600 + minute * 60 + second
