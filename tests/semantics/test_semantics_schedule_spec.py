"""Schedule spec compilation (8.1-8.3 validation, defaults, compiled form) and next-time
properties: DST weeks in America/New_York and Europe/London, agreement with a brute-force
search, epoch-aligned intervals."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamproc.semantics import CompiledSpec, ScheduleSpecError, action_times, compile_spec, next_action_time
from streamproc.semantics.schedule_spec import action_times_and_beyond, next_action_time_after

H = 3_600_000
M = 60_000


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


INVALID = [
    ("minute-range", {"calendar": [{"minute": "60"}]}, "Minute is not in range [0-59]"),
    ("slashes", {"calendar": [{"hour": "1/2/3"}]}, "Hour has too many slashes"),
    ("dashes", {"calendar": [{"hour": "1-2-3"}]}, "Hour has too many dashes"),
    ("missing-step", {"calendar": [{"minute": "5/"}]}, "Minute missing step value"),
    ("zero-step", {"calendar": [{"second": "*/0"}]}, "Second has invalid Step"),
    ("all-fields-listed", {"calendar": [{"second": "61", "month": "foo"}]},
     "Second is not in range [0-59], Month is not in range [1-12]"),
    ("year", {"cron_string": ["0 12 * * * 1999"]}, "Year is not in range [2000-2100]"),
    ("month-name-too-short", {"calendar": [{"month": "ja"}]}, "Month is not in range [1-12]"),
    ("cron-L", {"cron_string": ["0 12 L * *"]}, "DayOfMonth is not in range [1-31]"),
    ("structured-dow", {"structured_calendar": [{"day_of_week": [{"start": 7}]}]},
     "invalid calendar spec: DayOfWeek Start is not in range [0-6]"),
    ("structured-end", {"structured_calendar": [{"hour": [{"start": 5, "end": 3}], "minute": [{"start": 0, "step": -1}]}]},
     "invalid calendar spec: Minute has invalid Step, Hour End is before Start or not in range [0-23]"),
    ("comment", {"calendar": [{"comment": "x" * 201}]}, "invalid calendar spec: comment is too long"),
    ("interval-small", {"interval": [{"interval_ms": 999}]}, "interval is too small"),
    ("phase-negative", {"interval": [{"interval_ms": H, "phase_ms": -1}]}, "phase is negative"),
    ("tz-without-fields", {"cron_string": ["CRON_TZ=UTC"]}, "CronString has time zone but missing fields"),
    ("every-without-interval", {"cron_string": ["@every"]}, "CronString does not have interval after @every"),
    ("every-missing-unit", {"cron_string": ["@every 30"]}, 'time: missing unit in duration "30"'),
    ("every-unknown-unit", {"cron_string": ["@every 1w"]}, 'time: unknown unit "w" in duration "1w"'),
    ("two-cron-zones", {"cron_string": ["TZ=Europe/Paris 0 * * * *", "0 1 * * *"]}, "conflicting timezone names"),
    ("cron-zone-vs-name", {"cron_string": ["CRON_TZ=Europe/Paris 0 * * * *"], "timezone_name": "Asia/Tokyo"},
     "conflicting timezone names"),
    ("unknown-zone", {"timezone_name": "Mars/Olympus"}, "unknown time zone Mars/Olympus"),
    ("cron-unknown-zone", {"cron_string": ["CRON_TZ=Mars/Olympus 0 * * * *"]}, "unknown time zone Mars/Olympus"),
    ("every-sub-second", {"cron_string": ["@every 500ms"]}, "interval is too small"),
]


@pytest.mark.parametrize("spec,reason", [v[1:] for v in INVALID], ids=[v[0] for v in INVALID])
def test_invalid_spec_is_refused_with_temporals_words(spec, reason):
    with pytest.raises(ScheduleSpecError) as caught:
        compile_spec(spec)
    assert caught.value.reason == reason


def test_compiled_form_cleans_ranges_and_fills_sdk_defaults():
    compiled = compile_spec({
        "structured_calendar": [{"hour": [{"start": 9}], "comment": "nine"}],
        "cron_string": ["CRON_TZ=Europe/Berlin 30 9 * * MON-FRI # weekdays"],
        "interval": [{"interval_ms": 6 * H, "phase_ms": 5 * H}],
        "jitter_ms": 300_000,
    })
    out = compiled.to_dict()
    assert out["timezone_name"] == "Europe/Berlin"
    assert out["structured_calendar"][0] == {
        "second": [{"start": 0, "end": 0, "step": 1}], "minute": [{"start": 0, "end": 0, "step": 1}],
        "hour": [{"start": 9, "end": 9, "step": 1}], "day_of_month": [{"start": 1, "end": 31, "step": 1}],
        "month": [{"start": 1, "end": 12, "step": 1}], "year": [],
        "day_of_week": [{"start": 0, "end": 6, "step": 1}], "comment": "nine"}
    cron = out["structured_calendar"][1]
    assert cron["day_of_week"] == [{"start": 1, "end": 5, "step": 1}] and cron["comment"] == "weekdays"
    assert cron["minute"] == [{"start": 30, "end": 30, "step": 1}] and cron["year"] == []
    assert out["interval"] == [{"interval_ms": 6 * H, "phase_ms": 5 * H}]
    assert CompiledSpec.from_dict(out) == compiled
    assert compile_spec(out) == compiled  # compiling the compiled form changes nothing


def test_sunday_as_seven_folds_into_zero():
    cal = compile_spec({"calendar": [{"day_of_week": "3-7"}]}).to_dict()["structured_calendar"][0]
    assert cal["day_of_week"] == [{"start": 0, "end": 0, "step": 1}, {"start": 3, "end": 6, "step": 1}]


def test_repeated_calendars_and_intervals_are_kept_once():
    compiled = compile_spec({"cron_string": ["0 9 * * *"], "calendar": [{"hour": "9"}],
                             "interval": [{"interval_ms": H}, {"interval_ms": H}]})
    assert len(compiled.calendars) == 1 and len(compiled.intervals) == 1


def _hourly_week(zone: str, first_day: str) -> list[int]:
    spec = compile_spec({"calendar": [{"hour": "*", "minute": "0"}], "timezone_name": zone})
    # Seven local days, midnight to midnight: one of them is 23 or 25 hours long.
    first = datetime.fromisoformat(first_day)
    start = int(first.replace(tzinfo=ZoneInfo(zone)).timestamp() * 1000)
    end = int((first + timedelta(days=7)).replace(tzinfo=ZoneInfo(zone)).timestamp() * 1000)
    return [t.nominal_ms for t in action_times(spec, "", start - 1, limit=1000, until_ms=end - 1)]


@pytest.mark.parametrize("zone,first_day,hours", [
    ("America/New_York", "2026-03-05", 7 * 24 - 1),  # spring forward on 03-08: 02:00 never shows
    ("America/New_York", "2026-10-29", 7 * 24 + 1),  # fall back on 11-01: 01:00 shows twice
    ("Europe/London", "2026-03-26", 7 * 24 - 1),
    ("Europe/London", "2026-10-22", 7 * 24 + 1),
])
def test_hourly_week_across_a_dst_change(zone, first_day, hours):
    times = _hourly_week(zone, first_day)
    assert len(times) == hours
    assert all(b - a == H for a, b in zip(times, times[1:]))  # real time: one hour apart
    walls = [datetime.fromtimestamp(t / 1000, ZoneInfo(zone)) for t in times]
    assert all(w.minute == 0 and w.second == 0 for w in walls)
    assert times == sorted(set(times))  # a repeated wall hour fires at two distinct instants


def test_daily_wall_time_across_both_london_changes_in_a_week_each():
    spec = compile_spec({"calendar": [{"hour": "1", "minute": "30"}], "timezone_name": "Europe/London"})
    spring = action_times(spec, "", ms("2026-03-26T00:00:00Z"), limit=7)
    # 01:30 does not exist on 03-29 (clocks go 01:00 -> 02:00): skipped that day.
    assert [datetime.fromtimestamp(t.nominal_ms / 1000, timezone.utc).day for t in spring] == [26, 27, 28, 30, 31, 1, 2]
    autumn = action_times(spec, "", ms("2026-10-24T00:00:00Z"), limit=4)
    assert [t.nominal_ms for t in autumn] == [ms("2026-10-24T00:30:00Z"), ms("2026-10-25T00:30:00Z"),
                                              ms("2026-10-25T01:30:00Z"), ms("2026-10-26T01:30:00Z")]


ZONES = ["", "America/New_York", "Europe/London", "Asia/Kolkata", "Australia/Lord_Howe"]


def _subset(values, low, high):
    return ",".join(str(v) for v in sorted(set(values))) if values else f"{low}-{high}"


calendars = st.fixed_dictionaries({
    "second": st.lists(st.sampled_from([0, 15, 30, 59]), min_size=1, max_size=2).map(lambda v: _subset(v, 0, 59)),
    "minute": st.lists(st.integers(0, 59), max_size=3).map(lambda v: _subset(v, 0, 59)),
    "hour": st.lists(st.integers(0, 23), max_size=4).map(lambda v: _subset(v, 0, 23)),
    "day_of_week": st.lists(st.integers(0, 6), max_size=3).map(lambda v: _subset(v, 0, 6)),
})


def _matches(cal: dict, zone: str, unix_s: int) -> bool:
    wall = datetime.fromtimestamp(unix_s, ZoneInfo(zone) if zone else timezone.utc)
    fields = {"second": wall.second, "minute": wall.minute, "hour": wall.hour,
              "day_of_week": (wall.weekday() + 1) % 7}
    for name, value in fields.items():
        allowed = set()
        for part in cal[name].split(","):
            low, _, high = part.partition("-")
            allowed.update(range(int(low), int(high or low) + 1))
        if value not in allowed:
            return False
    return True


@settings(max_examples=60, deadline=None)
@given(calendars, st.sampled_from(ZONES),
       st.integers(ms("2026-01-01T00:00:00Z"), ms("2027-12-31T00:00:00Z")))
def test_next_time_is_the_first_matching_second_after(cal, zone, after_ms):
    spec = compile_spec({"calendar": [cal], "timezone_name": zone})
    found = next_action_time(spec, "", after_ms)
    assert found is not None and found.nominal_ms > after_ms and found.nominal_ms % 1000 == 0
    assert _matches(cal, zone, found.nominal_ms // 1000)
    # Brute force: no earlier matching second (only the calendar's seconds can match).
    seconds = sorted({int(s) for s in cal["second"].split(",") if "-" not in s} or range(60))
    minute = after_ms // 60_000 * 60
    while minute * 1000 < found.nominal_ms:
        for second in seconds:
            candidate = minute + second
            if after_ms < candidate * 1000 < found.nominal_ms:
                assert not _matches(cal, zone, candidate)
        minute += 60


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 10 * 24 * 3600), st.data(), st.integers(0, 2 * 10**12), st.integers(0, 3_600_000))
def test_intervals_are_epoch_aligned_and_increasing(interval_s, data, after_ms, jitter):
    phase_s = data.draw(st.integers(0, interval_s - 1))
    spec = compile_spec({"interval": [{"interval_ms": interval_s * 1000, "phase_ms": phase_s * 1000}],
                         "jitter_ms": jitter})
    times = action_times(spec, "ns-schedule", after_ms, limit=4)
    assert len(times) == 4 and times[0].nominal_ms > after_ms - 1000
    for t in times:
        assert (t.nominal_ms // 1000 - phase_s) % interval_s == 0
        assert t.nominal_ms <= t.actual_ms < t.nominal_ms + max(jitter, 1)
    assert all(a.actual_ms < b.actual_ms for a, b in zip(times, times[1:]))


_HINTED_SPECS = [
    {"interval": [{"interval_ms": 7000, "phase_ms": 3000}], "jitter_ms": 20_000},
    {"interval": [{"interval_ms": 1000}], "jitter_ms": 999, "start_time_ms": 1_700_000_003_500},
    {"cron_string": ["*/2 * * * *"], "exclude_calendar": [{"minute": "0-30"}], "jitter_ms": 90_000},
    {"calendar": [{"second": "*/5", "minute": "*", "hour": "*"}], "jitter_ms": 4_000,
     "timezone_name": "Europe/London"},
    {"interval": [{"interval_ms": 30_000}], "jitter_ms": 10_000, "end_time_ms": 1_700_000_300_000},
    {"interval": [{"interval_ms": 1000}], "start_time_ms": 1_700_000_100_000, "end_time_ms": 1_700_000_100_000},
]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(_HINTED_SPECS), st.integers(1_700_000_000_000, 1_700_000_600_000),
       st.integers(0, 200_000), st.integers(1, 6))
def test_the_next_time_from_a_pass_search_is_the_next_time_after_the_pass(raw, after_ms, window_ms, limit):
    """A pass searches the times up to now; where it stopped may be the next time after now."""
    spec = compile_spec(raw)
    now = after_ms + window_ms
    _, beyond = action_times_and_beyond(spec, "ns-s", after_ms, limit=limit, until_ms=now)
    assert next_action_time_after(spec, "ns-s", now, beyond) == next_action_time(spec, "ns-s", now)


def test_a_sparse_zoned_spec_answers_quickly():
    # Matches once, in 2099: the search jumps over the 70 years of DST changes in between.
    spec = compile_spec({"calendar": [{"year": "2099", "month": "6", "day_of_month": "1"}],
                         "timezone_name": "America/New_York"})
    next_action_time(spec, "", ms("2026-05-04T00:00:00Z"))  # first call fills the zone cache
    began = time.perf_counter()
    found = next_action_time(spec, "", ms("2026-05-04T00:00:00Z"))
    assert time.perf_counter() - began < 0.05
    assert found.nominal_ms == ms("2099-06-01T04:00:00Z")
    assert next_action_time(spec, "", found.nominal_ms) is None


# Answers of a real Temporal server (dev server 1.9.1 = Server 1.32.0) to the same specs,
# through ListScheduleMatchingTimes and DescribeSchedule.

def test_server_jitter_with_a_real_namespace_id_seed():
    spec = compile_spec({"interval": [{"interval_ms": H}], "jitter_ms": 600_000})
    seed = "01a21245-93bf-782b-8830-2d7cdfbb9d75-s-jitter"
    found = action_times(spec, seed, ms("2026-05-04T10:00:00Z"), limit=3)
    assert [t.actual_ms for t in found] == [ms("2026-05-04T11:00:35.903Z"), ms("2026-05-04T12:09:05.002Z"),
                                            ms("2026-05-04T13:02:36.815Z")]


def test_server_fold_hour_fires_twice_and_gap_hour_never():
    fold = compile_spec({"calendar": [{"hour": "1", "minute": "30"}], "timezone_name": "America/New_York"})
    assert [t.nominal_ms for t in action_times(fold, "", ms("2026-10-31T00:00:00Z"), limit=4)] == [
        ms("2026-10-31T05:30:00Z"), ms("2026-11-01T05:30:00Z"), ms("2026-11-01T06:30:00Z"), ms("2026-11-02T06:30:00Z")]
    gap = compile_spec({"cron_string": ["CRON_TZ=America/New_York 15,45 * * * *"]})
    found = action_times(gap, "", ms("2026-03-08T05:00:00Z"), limit=100, until_ms=ms("2026-03-08T09:00:00Z"))
    assert [t.nominal_ms for t in found] == [ms("2026-03-08T05:00:00Z") + k * 30 * M + 15 * M for k in range(8)]


def test_server_compiled_sunday_ranges_and_unvalidated_excludes():
    cal = compile_spec({"cron_string": ["0 0 * * 1-7/2"]}).to_dict()["structured_calendar"][0]
    assert cal["day_of_week"] == [{"start": 0, "end": 0, "step": 1}, {"start": 1, "end": 6, "step": 2}]
    # The server validates only the calendars, not the exclusions.
    spec = compile_spec({"cron_string": ["0 * * * *"],
                         "exclude_structured_calendar": [{"hour": [{"start": 30}], "day_of_week": [{"start": 9}]}]})
    assert len(action_times(spec, "", ms("2026-05-04T00:00:00Z"), limit=3)) == 3


@pytest.mark.parametrize("cron,reason", [
    ("5/ * * * *", "Minute missing step value"),
    ("5/x * * * *", 'strconv.Atoi: parsing "x": invalid syntax'),
    ("61 25 * * *", "Minute is not in range [0-59], Hour is not in range [0-23]"),
])
def test_server_step_and_range_messages(cron, reason):
    with pytest.raises(ScheduleSpecError) as caught:
        compile_spec({"cron_string": [cron]})
    assert caught.value.reason == reason


@given(st.binary(max_size=300))
def test_pure_python_fingerprint32_equals_the_native_one(data):
    farmhash = pytest.importorskip("farmhash")
    from streamproc.semantics.farmhash32 import fingerprint32

    assert fingerprint32(data) == farmhash.fingerprint32(data)
