"""robfig/cron v3 ``ParseStandard`` and ``Next``: the syntax of a cron workflow's schedule
(SEMANTICS.md 7.1), reproduced quirks included:

* exactly five fields (minute hour day-of-month month day-of-week), ``?`` = ``*``,
  month and weekday names, weekdays 0-6 only;
* descriptors ``@yearly`` ... ``@hourly`` and ``@every <Go duration>`` (relative to the
  previous scheduled time, not aligned to the epoch);
* ``CRON_TZ=<zone>`` / ``TZ=<zone>`` prefix, otherwise UTC;
* day-of-month and day-of-week are ORed when both are restricted;
* the next time is searched field by field (month, day, hour, minute, second) and at
  most five years ahead; DST gaps are skipped and repeated hours fire twice, as in Go.

Temporal's use of it (validation, backoff) is :mod:`~streamproc.semantics.cron_workflow`.
Times are timezone-aware datetimes; nothing here reads a clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from streamproc.semantics.go_duration import GoDurationError, parse_go_duration_ns

__all__ = ["CronSyntaxError", "CronSchedule", "parse_cron_schedule"]

_STAR_BIT = 1 << 63
_SEARCH_YEARS = 5
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_UTC = timezone.utc


class CronSyntaxError(ValueError):
    """robfig's own reason a spec does not parse (Temporal hides it behind
    :data:`INVALID_CRON_SCHEDULE`; the engine logs it)."""


@dataclass(frozen=True)
class _Bounds:
    low: int
    high: int
    names: dict[str, int] | None = None


_MONTH_NAMES = {
    name: number
    for number, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1
    )
}
_DAY_NAMES = {
    name: number
    for number, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))
}
_MINUTES = _Bounds(0, 59)
_HOURS = _Bounds(0, 23)
_DAYS_OF_MONTH = _Bounds(1, 31)
_MONTHS = _Bounds(1, 12, _MONTH_NAMES)
_DAYS_OF_WEEK = _Bounds(0, 6, _DAY_NAMES)


def _bits(low: int, high: int, step: int = 1) -> int:
    return sum(1 << value for value in range(low, high + 1, step))


def _all(bounds: _Bounds) -> int:
    return _bits(bounds.low, bounds.high) | _STAR_BIT


# Descriptors as robfig defines them: (minute, hour, day of month, month, day of week).
_DESCRIPTORS = {
    "@yearly": (1, 1 << 0, 1 << 1, 1 << 1, _all(_DAYS_OF_WEEK)),
    "@monthly": (1, 1 << 0, 1 << 1, _all(_MONTHS), _all(_DAYS_OF_WEEK)),
    "@weekly": (1, 1 << 0, _all(_DAYS_OF_MONTH), _all(_MONTHS), 1 << 0),
    "@daily": (1, 1 << 0, _all(_DAYS_OF_MONTH), _all(_MONTHS), _all(_DAYS_OF_WEEK)),
    "@hourly": (1, _all(_HOURS), _all(_DAYS_OF_MONTH), _all(_MONTHS), _all(_DAYS_OF_WEEK)),
}
_DESCRIPTORS["@annually"] = _DESCRIPTORS["@yearly"]
_DESCRIPTORS["@midnight"] = _DESCRIPTORS["@daily"]
_EVERY = "@every "


@dataclass(frozen=True)
class CronSchedule:
    """A parsed cron schedule: either field bit sets or a constant delay (``@every``).

    ``every_seconds`` is set for ``@every``; otherwise the bit sets hold one bit per
    allowed value (bit 63 marks a field given as ``*`` or ``?``). The second is always 0.
    """

    zone: ZoneInfo | timezone
    minute: int = 0
    hour: int = 0
    day_of_month: int = 0
    month: int = 0
    day_of_week: int = 0
    every_seconds: int | None = None

    def next_after(self, moment: datetime) -> datetime | None:
        """The first time strictly after ``moment`` (whole seconds), in UTC; ``None`` if
        none within five years (robfig's ``Next``)."""
        unix = math.floor(moment.timestamp())
        if self.every_seconds is not None:
            return _from_unix(unix + self.every_seconds)
        found = _SpecSearch(self).first_match_from(unix + 1)
        return None if found is None else _from_unix(found)

    def first_at_or_after(self, moment: datetime, *, after: datetime) -> datetime | None:
        """The first time of the chain ``next_after(after), next_after(that), ...`` that
        is not before ``moment``: the times between are the runs that were missed."""
        if self.every_seconds is not None:
            base = math.floor(after.timestamp())
            behind = (moment - _from_unix(base)) / timedelta(seconds=self.every_seconds)
            return _from_unix(base + max(1, math.ceil(behind)) * self.every_seconds)
        # A spec's chain visits every matching second in order, so skip straight to
        # the first one at or after ``moment`` instead of walking the missed ones.
        start = max(math.floor(after.timestamp()), math.ceil(moment.timestamp()) - 1)
        found = _SpecSearch(self).first_match_from(start + 1)
        return None if found is None else _from_unix(found)


def _from_unix(unix: int) -> datetime:
    return datetime.fromtimestamp(unix, _UTC)


# --- parsing (robfig's Parser.Parse with the standard options) -------------------------


def parse_cron_schedule(spec: str) -> CronSchedule:
    """Parse ``spec`` as robfig/cron v3 ``ParseStandard``; raises :class:`CronSyntaxError`
    with robfig's reason."""
    if not spec:
        raise CronSyntaxError("empty spec string")
    zone: ZoneInfo | timezone = _UTC
    if spec.startswith(("TZ=", "CRON_TZ=")):
        space = spec.find(" ")
        if space < 0:
            raise CronSyntaxError(f"time zone without fields: {spec}")
        name = spec[spec.index("=") + 1 : space]
        zone = _load_zone(name)
        spec = spec[space:].strip()
    if spec.startswith("@"):
        return _parse_descriptor(spec, zone)
    fields = spec.split()
    if len(fields) != 5:
        raise CronSyntaxError(f"expected exactly 5 fields, found {len(fields)}: {fields}")
    minute, hour, dom, month, dow = (
        _parse_field(text, bounds)
        for text, bounds in zip(
            fields, (_MINUTES, _HOURS, _DAYS_OF_MONTH, _MONTHS, _DAYS_OF_WEEK)
        )
    )
    return CronSchedule(zone, minute, hour, dom, month, dow)


def _load_zone(name: str) -> ZoneInfo | timezone:
    # Go's LoadLocation: "" and "UTC" are UTC; "Local" is the server's zone, UTC there.
    if name in ("", "UTC", "Local"):
        return _UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as error:
        raise CronSyntaxError(f"provided bad location {name}: {error}") from None


def _parse_descriptor(spec: str, zone: ZoneInfo | timezone) -> CronSchedule:
    if spec in _DESCRIPTORS:
        return CronSchedule(zone, *_DESCRIPTORS[spec])
    if spec.startswith(_EVERY):
        try:
            nanoseconds = parse_go_duration_ns(spec[len(_EVERY) :])
        except GoDurationError as error:
            raise CronSyntaxError(f"failed to parse duration {spec}: {error}") from None
        # robfig's Every(): at least a second, sub-second part dropped.
        return CronSchedule(zone, every_seconds=max(nanoseconds, 1_000_000_000) // 1_000_000_000)
    raise CronSyntaxError(f"unrecognized descriptor: {spec}")


def _parse_field(text: str, bounds: _Bounds) -> int:
    bits = 0
    for expression in (part for part in text.split(",") if part):
        bits |= _parse_range(expression, bounds)
    return bits


def _parse_range(expression: str, bounds: _Bounds) -> int:
    range_and_step = expression.split("/")
    low_and_high = range_and_step[0].split("-")
    extra = 0
    if low_and_high[0] in ("*", "?"):
        start, end, extra = bounds.low, bounds.high, _STAR_BIT
    else:
        start = _int_or_name(low_and_high[0], bounds.names)
        if len(low_and_high) == 1:
            end = start
        elif len(low_and_high) == 2:
            end = _int_or_name(low_and_high[1], bounds.names)
        else:
            raise CronSyntaxError(f"too many hyphens: {expression}")
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _non_negative_int(range_and_step[1])
        if len(low_and_high) == 1:  # "N/step" means "N-max/step"
            end = bounds.high
        if step > 1:
            extra = 0
    else:
        raise CronSyntaxError(f"too many slashes: {expression}")
    if start < bounds.low:
        raise CronSyntaxError(
            f"beginning of range ({start}) below minimum ({bounds.low}): {expression}"
        )
    if end > bounds.high:
        raise CronSyntaxError(f"end of range ({end}) above maximum ({bounds.high}): {expression}")
    if start > end:
        raise CronSyntaxError(
            f"beginning of range ({start}) beyond end of range ({end}): {expression}"
        )
    if step == 0:
        raise CronSyntaxError(f"step of range should be a positive number: {expression}")
    return _bits(start, end, step) | extra


def _int_or_name(text: str, names: dict[str, int] | None) -> int:
    if names is not None and text.lower() in names:
        return names[text.lower()]
    return _non_negative_int(text)


def _non_negative_int(text: str) -> int:
    # Go's strconv.Atoi: optional sign, ASCII digits only.
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not digits.isascii() or not digits.isdigit():
        raise CronSyntaxError(f"failed to parse int from {text}: invalid syntax")
    number = int(text)
    if number < 0:
        raise CronSyntaxError(f"negative number ({number}) not allowed: {text}")
    return number


# --- the next time (robfig's SpecSchedule.Next, in Go's time arithmetic) --------------


class _SpecSearch:
    """robfig's field-wise search, on unix seconds with Go's wall-clock rules for the
    schedule's zone (a wall time in a DST gap or fold resolves as Go's ``time.Date``)."""

    def __init__(self, schedule: CronSchedule) -> None:
        self.s = schedule
        self.zone = schedule.zone

    def wall(self, unix: int) -> datetime:
        return datetime.fromtimestamp(unix, self.zone)

    def offset(self, unix: int) -> int:
        if self.zone is _UTC:
            return 0
        return int(self.wall(unix).utcoffset().total_seconds())  # type: ignore[union-attr]

    def date_in_zone(self, year: int, month: int, day: int, hour: int = 0) -> int:
        """Go's ``time.Date(year, month, day, hour, 0, 0, 0, zone)`` (out-of-range values
        normalise, e.g. month 13 is January of the next year)."""
        year, month = year + (month - 1) // 12, (month - 1) % 12 + 1
        days = date(year, month, 1).toordinal() - _EPOCH_ORDINAL + day - 1
        local = days * 86_400 + hour * 3_600
        guess = self.offset(local)
        actual = self.offset(local - guess)
        return local - actual

    def day_matches(self, moment: datetime) -> bool:
        s = self.s
        dom = bool(s.day_of_month >> moment.day & 1)
        dow = bool(s.day_of_week >> ((moment.weekday() + 1) % 7) & 1)
        if s.day_of_month & _STAR_BIT or s.day_of_week & _STAR_BIT:
            return dom and dow
        return dom or dow

    def first_match_from(self, unix: int) -> int | None:
        """The first match at or after ``unix`` (a whole second), or ``None``."""
        s = self.s
        t = unix
        added = False
        year_limit = self.wall(t).year + _SEARCH_YEARS
        while True:  # robfig's WRAP label
            w = self.wall(t)
            if w.year > year_limit:
                return None
            wrapped = False
            while not s.month >> w.month & 1:
                if not added:
                    added = True
                    t = self.date_in_zone(w.year, w.month, 1)
                    w = self.wall(t)
                t = self.date_in_zone(w.year, w.month + 1, w.day, w.hour)
                w = self.wall(t)
                if w.month == 1:
                    wrapped = True
                    break
            if wrapped:
                continue
            while not self.day_matches(w):
                if not added:
                    added = True
                    t = self.date_in_zone(w.year, w.month, w.day)
                    w = self.wall(t)
                t = self.date_in_zone(w.year, w.month, w.day + 1, w.hour)
                w = self.wall(t)
                if w.hour != 0:  # DST moved midnight: go back to it
                    t += (24 - w.hour) * 3_600 if w.hour > 12 else -w.hour * 3_600
                    w = self.wall(t)
                if w.day == 1:
                    wrapped = True
                    break
            if wrapped:
                continue
            while not s.hour >> w.hour & 1:
                if not added:
                    added = True
                    t = self.date_in_zone(w.year, w.month, w.day, w.hour)
                t += 3_600
                w = self.wall(t)
                if w.hour == 0:
                    wrapped = True
                    break
            if wrapped:
                continue
            while not s.minute >> w.minute & 1:
                if not added:
                    added = True
                    t -= t % 60
                t += 60
                w = self.wall(t)
                if w.minute == 0:
                    wrapped = True
                    break
            if wrapped:
                continue
            if w.second != 0:  # the second field is always 0
                if not added:
                    added = True
                t += 60 - w.second
                continue  # second wrapped to 0: robfig goes back to WRAP
            return t
