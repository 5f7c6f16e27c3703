"""Schedule calendars: the structured form, its validation, and the string grammar.

A schedule's calendar (SEMANTICS.md 8.1) is a set of ranges per field; a time matches
when every field matches. Temporal accepts it in two forms, structured (lists of
``{start, end, step}``) and strings (``"Mon-Fri"``, ``"*/15"``), and compiles the strings
into the structured form, which is what Describe shows. This module owns both forms;
``schedule_search`` finds the next matching time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from streamproc.semantics.errors import ScheduleSpecError

__all__ = [
    "CALENDAR_FIELDS",
    "MAX_CALENDAR_YEAR",
    "MIN_CALENDAR_YEAR",
    "ScheduleRange",
    "StructuredCalendar",
    "parse_calendar_strings",
    "structured_calendar_from_dict",
    "validate_structured_calendar",
]

MIN_CALENDAR_YEAR = 2000
#: No calendar time, and no action time at all, lies after this year (Temporal's bound).
MAX_CALENDAR_YEAR = 2100
MAX_COMMENT_LENGTH = 200

#: The fields in Temporal's proto order (also the order of the compiled dict's keys).
CALENDAR_FIELDS = ("second", "minute", "hour", "day_of_month", "month", "year", "day_of_week")


@dataclass(frozen=True, order=True)
class ScheduleRange:
    """``start, start+step, ... <= end``. Compiled specs hold it cleaned (``end >= start``,
    ``step >= 1``); a raw range from input may use Temporal's zero defaults."""

    start: int
    end: int
    step: int

    @classmethod
    def cleaned(cls, start: int, end: int = 0, step: int = 0) -> ScheduleRange:
        # Temporal's proto leaves end = 0 / step = 0 for "same as start" / "1".
        return cls(start, max(end, start), step if step > 0 else 1)

    def values(self, low: int, high: int) -> range:
        """The matching values, clipped to ``[low, high]`` (unvalidated excludes may overreach)."""
        first = self.start
        if first < low:
            first += -(-(low - first) // self.step) * self.step
        return range(first, min(self.end, high) + 1, self.step)

    def to_dict(self) -> dict[str, int]:
        return {"start": self.start, "end": self.end, "step": self.step}


Ranges = tuple[ScheduleRange, ...]

_SDK_DEFAULTS: dict[str, Ranges] = {
    # The Temporal Python SDK's ScheduleCalendarSpec defaults, used for a missing key.
    "second": (ScheduleRange(0, 0, 1),),
    "minute": (ScheduleRange(0, 0, 1),),
    "hour": (ScheduleRange(0, 0, 1),),
    "day_of_month": (ScheduleRange(1, 31, 1),),
    "month": (ScheduleRange(1, 12, 1),),
    "year": (),
    "day_of_week": (ScheduleRange(0, 6, 1),),
}


@dataclass(frozen=True)
class StructuredCalendar:
    """Temporal's ``StructuredCalendarSpec``. An empty field matches nothing, except
    ``year``, where empty means every year."""

    second: Ranges
    minute: Ranges
    hour: Ranges
    day_of_month: Ranges
    month: Ranges
    year: Ranges
    day_of_week: Ranges
    comment: str = ""

    def cleaned(self) -> StructuredCalendar:
        """Zero defaults made explicit (what Describe shows and the search uses)."""
        fields = {name: tuple(ScheduleRange.cleaned(r.start, r.end, r.step) for r in getattr(self, name))
                  for name in CALENDAR_FIELDS}
        return StructuredCalendar(**fields, comment=self.comment)

    def to_dict(self) -> dict:
        out: dict = {name: [r.to_dict() for r in getattr(self, name)] for name in CALENDAR_FIELDS}
        out["comment"] = self.comment
        return out


def _range_from_dict(value: object) -> ScheduleRange:
    # Kept raw (end 0 = "same as start", step 0 = 1) until validated, because Temporal
    # refuses an explicit end before start but accepts the zero defaults.
    if isinstance(value, int) and not isinstance(value, bool):
        return ScheduleRange(value, 0, 0)
    if not isinstance(value, Mapping):
        raise ScheduleSpecError(f"range must be an object with start, end and step, got {value!r}")
    try:
        start, end, step = (int(value.get(key) or 0) for key in ("start", "end", "step"))
    except (TypeError, ValueError):
        raise ScheduleSpecError(f"range start, end and step must be integers, got {dict(value)!r}") from None
    return ScheduleRange(start, end, step)


def structured_calendar_from_dict(value: object) -> StructuredCalendar:
    """Read one ``structured_calendar`` entry; a missing field takes the SDK default."""
    if not isinstance(value, Mapping):
        raise ScheduleSpecError(f"structured calendar must be an object, got {value!r}")
    fields: dict[str, Ranges] = {}
    for name in CALENDAR_FIELDS:
        if name not in value or value[name] is None:
            fields[name] = _SDK_DEFAULTS[name]
            continue
        raw = value[name]
        if not isinstance(raw, (list, tuple)):
            raise ScheduleSpecError(f"{name} must be a list of ranges, got {raw!r}")
        fields[name] = tuple(_range_from_dict(item) for item in raw)
    return StructuredCalendar(**fields, comment=str(value.get("comment") or ""))


# Temporal's field names and bounds for the structured form (day of week stops at 6 here).
_STRUCTURED_BOUNDS = (
    ("second", "Second", 0, 59),
    ("minute", "Minute", 0, 59),
    ("hour", "Hour", 0, 23),
    ("day_of_month", "DayOfMonth", 1, 31),
    ("month", "Month", 1, 12),
    ("year", "Year", MIN_CALENDAR_YEAR, MAX_CALENDAR_YEAR),
    ("day_of_week", "DayOfWeek", 0, 6),
)


def validate_structured_calendar(calendar: StructuredCalendar) -> None:
    """Raise Temporal's ``invalid calendar spec: ...`` listing every bad range."""
    errors: list[str] = []
    for name, label, low, high in _STRUCTURED_BOUNDS:
        for r in getattr(calendar, name):
            if not low <= r.start <= high:
                errors.append(f"{label} Start is not in range [{low}-{high}]")
            if r.end != 0 and (r.end < r.start or r.end > high):
                errors.append(f"{label} End is before Start or not in range [{low}-{high}]")
            if r.step < 0:
                errors.append(f"{label} has invalid Step")
    if len(calendar.comment) > MAX_COMMENT_LENGTH:
        errors.append("comment is too long")
    if errors:
        raise ScheduleSpecError("invalid calendar spec: " + ", ".join(errors))


# ----------------------------------------------------------------------------------------
# The string grammar (CalendarSpec and cron fields)

_MONTH_NAMES = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
                "october", "november", "december")
_DAY_NAMES = ("sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday")
_GO_INT = re.compile(r"[+-]?[0-9]+\Z")

# (field, Temporal's label, default when empty, low, high) in Temporal's parse order,
# which is also the order its joined error message lists the fields in.
_STRING_FIELDS = (
    ("second", "Second", "0", 0, 59),
    ("minute", "Minute", "0", 0, 59),
    ("hour", "Hour", "0", 0, 23),
    ("day_of_week", "DayOfWeek", "*", 0, 7),
    ("day_of_month", "DayOfMonth", "*", 1, 31),
    ("month", "Month", "*", 1, 12),
    ("year", "Year", "*", MIN_CALENDAR_YEAR, MAX_CALENDAR_YEAR),
)


class _BadField(Exception):
    """One field's message; all fields' messages are joined into one error."""


def _go_atoi(text: str) -> int | None:
    return int(text) if _GO_INT.match(text) else None


def _parse_value(text: str, low: int, high: int, names: tuple[str, ...], min_prefix: int,
                 first_index: int) -> int | None:
    """An integer, or an English name by prefix; ``None`` when invalid or out of range."""
    if names and len(text) >= min_prefix:
        lowered = text.lower()
        for index, name in enumerate(names):
            if name.startswith(lowered):
                value = index + first_index
                return value if low <= value <= high else None
    value = _go_atoi(text)
    return value if value is not None and low <= value <= high else None


def _parse_field(text: str, name: str, label: str, default: str, low: int, high: int) -> Ranges:
    text = text.strip() or default
    if text == "*" and name == "year":
        return ()  # every year is stored as no ranges at all
    names, min_prefix, first_index = (), 0, 0
    if name == "month":
        names, min_prefix, first_index = _MONTH_NAMES, 3, 1
    elif name == "day_of_week":
        names, min_prefix = _DAY_NAMES, 2
    ranges: list[ScheduleRange] = []
    for part in text.split(","):
        step, has_step = 1, False
        if "/" in part:
            pieces = part.split("/")
            if len(pieces) != 2:
                raise _BadField(f"{label} has too many slashes")
            part, step_text = pieces
            if step_text == "":
                raise _BadField(f"{label} missing step value")
            parsed_step = _go_atoi(step_text)
            if parsed_step is None:
                raise _BadField(f'strconv.Atoi: parsing "{step_text}": invalid syntax')
            if parsed_step < 1:
                raise _BadField(f"{label} has invalid Step")
            step, has_step = parsed_step, True
        start, end = low, high
        if part != "*":
            if "-" in part:
                pieces = part.split("-")
                if len(pieces) != 2:
                    raise _BadField(f"{label} has too many dashes")
                first = _parse_value(pieces[0], low, high, names, min_prefix, first_index)
                if first is None:
                    raise _BadField(f"{label} Start is not in range [{low}-{high}]")
                last = _parse_value(pieces[1], first, high, names, min_prefix, first_index)
                if last is None:
                    raise _BadField(f"{label} End is before Start or not in range [{low}-{high}]")
                start, end = first, last
            else:
                value = _parse_value(part, low, high, names, min_prefix, first_index)
                if value is None:
                    raise _BadField(f"{label} is not in range [{low}-{high}]")
                start, end = value, (high if has_step else value)
        if name == "day_of_week" and end == 7:
            # 7 is another Sunday: fold it into 0, which may need a range of its own.
            if (7 - start) % step == 0 and (step > 1 or start > 1):
                ranges.append(ScheduleRange(0, 0, 1))
                if start == 7:
                    continue
            end = 6
        ranges.append(ScheduleRange.cleaned(start, end, step))
    return tuple(ranges)


def parse_calendar_strings(value: Mapping[str, object]) -> StructuredCalendar:
    """Compile a string-form ``CalendarSpec`` (8.1 grammar; empty second/minute/hour = 0)."""
    errors: list[str] = []
    fields: dict[str, Ranges] = {}
    for name, label, default, low, high in _STRING_FIELDS:
        raw = value.get(name)
        if raw is not None and not isinstance(raw, str):
            raise ScheduleSpecError(f"calendar field {name} must be a string, got {raw!r}")
        try:
            fields[name] = _parse_field(raw or "", name, label, default, low, high)
        except _BadField as bad:
            errors.append(str(bad))
    if errors:
        raise ScheduleSpecError(", ".join(errors))
    return StructuredCalendar(**fields, comment=str(value.get("comment") or ""))
