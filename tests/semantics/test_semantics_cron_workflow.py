"""Cron workflows (SEMANTICS.md 7): every vector of 7.3, robfig's syntax of 7.1, and the
start vector of 3.2."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamproc.semantics.cron_workflow import (
    INVALID_CRON_SCHEDULE,
    NO_TIME_CAN_BE_FOUND,
    cron_backoff,
    validate_cron_schedule,
)
from streamproc.semantics.robfig_cron import CronSyntaxError, parse_cron_schedule
from streamproc.semantics.errors import InvalidArgument
from streamproc.semantics.go_duration import GoDurationError, parse_go_duration_ns
from streamproc.semantics.workflow_timeouts import WorkflowTimeouts, workflow_run_deadlines


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)


# (id, cron, scheduled, now or None for "same", backoff, next time)
VECTORS = [
    ("C01", "*/10 * * * *", "2026-05-04T00:04:00Z", None, timedelta(minutes=6), "2026-05-04T00:10:00Z"),
    ("C02", "0 10 * * *", "2026-05-04T10:00:00Z", "2026-05-04T10:03:12Z",
     timedelta(hours=23, minutes=56, seconds=48), "2026-05-05T10:00:00Z"),
    ("C04", "@every 5h", "2026-05-04T08:00:00Z", "2026-05-04T09:00:00Z", timedelta(hours=4), "2026-05-04T13:00:00Z"),
    ("C05", "@every 5h", "2026-05-04T08:00:00Z", "2026-05-05T00:00:00Z", timedelta(hours=4), "2026-05-05T04:00:00Z"),
    ("C06", "@every 30m", "2026-05-04T08:00:00Z", None, timedelta(minutes=30), "2026-05-04T08:30:00Z"),
    ("C07", "@every 30m", "2026-05-04T09:00:00Z", "2026-05-04T08:45:00Z", timedelta(minutes=15), "2026-05-04T09:00:00Z"),
    ("C08", "CRON_TZ=America/New_York 0 9 * * *", "2026-03-07T15:00:00Z", None, timedelta(hours=22),
     "2026-03-08T13:00:00Z"),
    ("C11", "0 0 13 * 5", "2026-04-11T00:00:00Z", None, timedelta(hours=48), "2026-04-13T00:00:00Z"),
    ("C12", "* * * * *", "2026-05-04T08:08:18.250Z", None, timedelta(seconds=42), "2026-05-04T08:09:00Z"),
    ("C17", "0 12 * * ?", "2026-05-04T00:00:00Z", None, timedelta(hours=12), "2026-05-04T12:00:00Z"),
    ("C18", "TZ=Asia/Kolkata 0 9 * * *", "2026-05-04T00:00:00Z", None, timedelta(hours=3, minutes=30),
     "2026-05-04T03:30:00Z"),
]


@pytest.mark.parametrize(
    "cron, scheduled, now, backoff, following", [v[1:] for v in VECTORS], ids=[v[0] for v in VECTORS]
)
def test_cron_vector(cron, scheduled, now, backoff, following):
    scheduled_at = utc(scheduled)
    now_at = utc(now) if now else scheduled_at
    assert cron_backoff(cron, scheduled_at, now_at) == backoff
    # The next time itself (the backoff is rounded up from it to a whole second).
    assert now_at + backoff - utc(following) < timedelta(seconds=1)
    validate_cron_schedule(cron, now_at)


REJECTED = [
    ("C14", "0 0 31 2 *", NO_TIME_CAN_BE_FOUND),
    ("C15", "0 0 * * 7", INVALID_CRON_SCHEDULE),
    ("C16", "0 0 1 1 * 2027", INVALID_CRON_SCHEDULE),
]


@pytest.mark.parametrize("cron, message", [r[1:] for r in REJECTED], ids=[r[0] for r in REJECTED])
def test_cron_rejected_vector(cron, message):
    with pytest.raises(InvalidArgument) as raised:
        validate_cron_schedule(cron, utc("2026-05-04T00:00:00Z"))
    assert str(raised.value) == message
    assert cron_backoff(cron, utc("2026-05-04T00:00:00Z"), utc("2026-05-04T00:00:00Z")) is None


def test_start_vector_of_3_2():
    start = utc("2026-05-04T00:04:00Z")
    backoff = cron_backoff("*/30 * * * *", start, start)
    assert backoff == timedelta(minutes=26)
    deadlines = workflow_run_deadlines(
        WorkflowTimeouts(execution=timedelta(hours=1), run=timedelta(minutes=20)),
        start_time=start, execution_expiration=start + timedelta(hours=1),
        first_workflow_task_backoff=backoff,
    )
    assert deadlines.execution_time == utc("2026-05-04T00:30:00Z")
    assert deadlines.run_expiration == utc("2026-05-04T00:50:00Z")


@pytest.mark.parametrize(
    "cron, reason",
    [
        ("", "empty spec string"),
        ("0 12 * *", "expected exactly 5 fields, found 4"),
        ("0 0 0 * *", "beginning of range (0) below minimum (1)"),
        ("0 24 * * *", "end of range (24) above maximum (23)"),
        ("5-1 * * * *", "beginning of range (5) beyond end of range (1)"),
        ("*/0 * * * *", "step of range should be a positive number"),
        ("1-2-3 * * * *", "too many hyphens"),
        ("1/2/3 * * * *", "too many slashes"),
        ("x * * * *", "failed to parse int from x"),
        ("0 0 * foo *", "failed to parse int from foo"),
        ("@daly", "unrecognized descriptor"),
        ("@every 1d", "failed to parse duration"),
        ("@every ", "failed to parse duration"),
        ("CRON_TZ=Mars/Olympus 0 9 * * *", "provided bad location Mars/Olympus"),
        ("CRON_TZ=UTC", "time zone without fields"),
    ],
)
def test_syntax_errors_say_robfigs_reason(cron, reason):
    with pytest.raises(CronSyntaxError, match=re.escape(reason)):
        parse_cron_schedule(cron)
    if not cron:  # no cron schedule at all: a plain workflow
        assert validate_cron_schedule(cron, utc("2026-05-04T00:00:00Z")) is None
        return
    with pytest.raises(InvalidArgument, match="invalid CronSchedule"):
        validate_cron_schedule(cron, utc("2026-05-04T00:00:00Z"))


def next_times(cron: str, start: str, count: int = 3) -> list[str]:
    schedule = parse_cron_schedule(cron)
    moment, found = utc(start), []
    for _ in range(count):
        moment = schedule.next_after(moment)
        found.append(moment.strftime("%Y-%m-%dT%H:%M:%SZ"))
    return found


@pytest.mark.parametrize(
    "cron, start, expected",
    [
        ("0 9 * JAN-mar MON", "2026-05-04T00:00:00Z",
         ["2027-01-04T09:00:00Z", "2027-01-11T09:00:00Z", "2027-01-18T09:00:00Z"]),
        ("15/20 * * * *", "2026-05-04T00:00:00Z",
         ["2026-05-04T00:15:00Z", "2026-05-04T00:35:00Z", "2026-05-04T00:55:00Z"]),
        ("0 0 1,15 * *", "2026-05-04T00:00:00Z",
         ["2026-05-15T00:00:00Z", "2026-06-01T00:00:00Z", "2026-06-15T00:00:00Z"]),
        # Day of month restricted, weekday "*": AND (every 13th); "*/1" keeps the star.
        ("0 0 13 * *", "2026-04-11T00:00:00Z",
         ["2026-04-13T00:00:00Z", "2026-05-13T00:00:00Z", "2026-06-13T00:00:00Z"]),
        ("0 0 13 * */1", "2026-04-11T00:00:00Z",
         ["2026-04-13T00:00:00Z", "2026-05-13T00:00:00Z", "2026-06-13T00:00:00Z"]),
        ("@yearly", "2026-05-04T00:00:00Z", ["2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z", "2029-01-01T00:00:00Z"]),
        ("@weekly", "2026-05-06T00:00:00Z", ["2026-05-10T00:00:00Z", "2026-05-17T00:00:00Z", "2026-05-24T00:00:00Z"]),
        ("@monthly", "2026-05-06T00:00:00Z", ["2026-06-01T00:00:00Z", "2026-07-01T00:00:00Z", "2026-08-01T00:00:00Z"]),
        ("@hourly", "2026-05-06T00:00:00Z", ["2026-05-06T01:00:00Z", "2026-05-06T02:00:00Z", "2026-05-06T03:00:00Z"]),
        ("0 0 29 2 *", "2026-05-04T00:00:00Z",
         ["2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z", "2036-02-29T00:00:00Z"]),
        # DST: 02:30 New York does not exist on 2026-03-08 (skipped); 01:30 happens twice on 11-01.
        ("CRON_TZ=America/New_York 30 2 * * *", "2026-03-07T00:00:00Z",
         ["2026-03-07T07:30:00Z", "2026-03-09T06:30:00Z", "2026-03-10T06:30:00Z"]),
        ("CRON_TZ=America/New_York 30 1 * * *", "2026-10-31T12:00:00Z",
         ["2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z", "2026-11-02T06:30:00Z"]),
        ("@every 1h30m", "2026-05-04T00:00:00.900Z",
         ["2026-05-04T01:30:00Z", "2026-05-04T03:00:00Z", "2026-05-04T04:30:00Z"]),
        ("@every 500ms", "2026-05-04T00:00:00Z", ["2026-05-04T00:00:01Z", "2026-05-04T00:00:02Z", "2026-05-04T00:00:03Z"]),
    ],
)
def test_next_times(cron, start, expected):
    assert next_times(cron, start) == expected


def test_missed_runs_are_skipped_without_walking_them():
    # A year behind a per-minute cron: the next run is the next minute after now.
    assert cron_backoff("* * * * *", utc("2025-05-04T00:00:00Z"), utc("2026-05-04T00:00:30Z")) == timedelta(seconds=30)
    # On a boundary "now" itself is the next time.
    assert cron_backoff("* * * * *", utc("2026-05-04T00:00:00Z"), utc("2026-05-04T00:05:00Z")) == timedelta(0)
    assert cron_backoff("@every 1s", utc("2020-01-01T00:00:00Z"), utc("2026-05-04T00:00:00.5Z")) == timedelta(seconds=1)


@pytest.mark.parametrize(
    "text, nanoseconds",
    [("1h30m", 5_400_000_000_000), ("0", 0), ("1.5s", 1_500_000_000), ("-2m", -120_000_000_000),
     ("300ms", 300_000_000), ("1us", 1_000), ("1µs", 1_000), (".5h", 1_800_000_000_000)],
)
def test_go_durations(text, nanoseconds):
    assert parse_go_duration_ns(text) == nanoseconds


@pytest.mark.parametrize("text", ["", "1d", "h", "1", "1.h2", "--1s", "9999999999h"])
def test_bad_go_durations(text):
    with pytest.raises(GoDurationError):
        parse_go_duration_ns(text)


# --- the field-wise search agrees with a plain scan of every hour ----------------------


def _field(draw, low: int, high: int) -> str:
    kind = draw(st.sampled_from(["*", "value", "range", "step", "list"]))
    a, b = sorted(draw(st.lists(st.integers(low, high), min_size=2, max_size=2)))
    if kind == "*":
        return "*"
    if kind == "value":
        return str(a)
    if kind == "range":
        return f"{a}-{b}"
    if kind == "step":
        return f"{draw(st.sampled_from(['*', str(a)]))}/{draw(st.integers(1, 7))}"
    return ",".join(str(v) for v in draw(st.lists(st.integers(low, high), min_size=1, max_size=3)))


@st.composite
def specs(draw) -> str:
    zone = draw(st.sampled_from(["", "CRON_TZ=America/New_York ", "TZ=Europe/London "]))
    fields = [_field(draw, 0, 59), _field(draw, 0, 23), _field(draw, 1, 31), _field(draw, 1, 12),
              _field(draw, 0, 6)]
    return zone + " ".join(fields)


def _scan(spec: str, after: datetime) -> datetime | None:
    """The first matching minute strictly after `after`, found by looking at every hour
    (in absolute time, so DST gaps are skipped and repeated hours seen twice) for five years."""
    schedule = parse_cron_schedule(spec)
    zone = schedule.zone if isinstance(schedule.zone, ZoneInfo) else timezone.utc
    star = 1 << 63
    start = (after.replace(microsecond=0) + timedelta(seconds=1)).astimezone(timezone.utc)
    hour = start.replace(minute=0, second=0)
    for _ in range(5 * 366 * 24):
        local = hour.astimezone(zone)
        dom = bool(schedule.day_of_month >> local.day & 1)
        dow = bool(schedule.day_of_week >> ((local.weekday() + 1) % 7) & 1)
        day = (dom and dow) if (schedule.day_of_month & star or schedule.day_of_week & star) else (dom or dow)
        if schedule.month >> local.month & 1 and day and schedule.hour >> local.hour & 1:
            for minute in range(60):
                moment = hour + timedelta(minutes=minute)
                if moment >= start and schedule.minute >> minute & 1:
                    return moment
        hour += timedelta(hours=1)
    return None


@settings(max_examples=60, deadline=None)
@given(spec=specs(), offset_minutes=st.integers(0, 2 * 365 * 24 * 60), second=st.integers(0, 59))
def test_next_time_matches_a_scan_of_every_hour(spec, offset_minutes, second):
    after = datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(minutes=offset_minutes, seconds=second)
    found = parse_cron_schedule(spec).next_after(after)
    expected = _scan(spec, after)
    if expected is None:  # robfig gives up a little earlier or later than five years
        return
    assert found == expected, (spec, after)
