"""Every schedule spec vector of SEMANTICS.md 8.11 (S01-S49) against the pure functions."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from streamproc.semantics import (
    ActionTime,
    InvalidArgument,
    ScheduleSpecError,
    action_times,
    compile_spec,
    next_action_time,
)


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def iso(epoch_ms: int) -> str:
    moment = datetime.fromtimestamp(epoch_ms / 1000, timezone.utc)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if epoch_ms % 1000:
        text += f".{epoch_ms % 1000:03d}"
    return text + "Z"


H = 3_600_000
D = 24 * H
M = 60_000

# (id, spec, reference, expected nominal times; None closes a sequence that must end there)
VECTORS = [
    ("S01", {"interval": [{"interval_ms": H}]}, "2026-03-08T10:20:00Z",
     ["2026-03-08T11:00:00Z", "2026-03-08T12:00:00Z", "2026-03-08T13:00:00Z"]),
    ("S02", {"cron_string": ["@every 6h/5h"]}, "2026-01-01T00:00:00Z",
     ["2026-01-01T05:00:00Z", "2026-01-01T11:00:00Z", "2026-01-01T17:00:00Z"]),
    ("S03", {"interval": [{"interval_ms": 28 * D}]}, "2026-01-01T00:00:00Z",
     ["2026-01-15T00:00:00Z", "2026-02-12T00:00:00Z", "2026-03-12T00:00:00Z"]),
    ("S04", {"interval": [{"interval_ms": 28 * D, "phase_ms": 3 * D + 5 * H + 23 * M}]}, "2022-02-17T00:00:00Z",
     ["2022-02-20T05:23:00Z", "2022-03-20T05:23:00Z"]),
    ("S05", {"interval": [{"interval_ms": 90 * M, "phase_ms": 17 * M}]}, "2026-05-04T10:00:00Z",
     ["2026-05-04T10:47:00Z", "2026-05-04T12:17:00Z", "2026-05-04T13:47:00Z"]),
    ("S06", {"interval": [{"interval_ms": H}]}, "2026-05-04T10:00:00Z",
     ["2026-05-04T11:00:00Z", "2026-05-04T12:00:00Z"]),
    ("S08", {"calendar": [{"minute": "5/20", "hour": "*"}]}, "2026-05-04T10:00:00Z",
     ["2026-05-04T10:05:00Z", "2026-05-04T10:25:00Z", "2026-05-04T10:45:00Z", "2026-05-04T11:05:00Z"]),
    ("S09", {"calendar": [{"month": "Jan,Jul", "day_of_month": "1", "hour": "12"}]}, "2026-03-01T00:00:00Z",
     ["2026-07-01T12:00:00Z", "2027-01-01T12:00:00Z", "2027-07-01T12:00:00Z"]),
    ("S10", {"calendar": [{"month": "sep-nov", "day_of_month": "15"}]}, "2026-01-01T00:00:00Z",
     ["2026-09-15T00:00:00Z", "2026-10-15T00:00:00Z", "2026-11-15T00:00:00Z"]),
    ("S11", {"calendar": [{"day_of_week": "Mon-Fri", "hour": "8", "minute": "30"}]}, "2026-05-08T09:00:00Z",
     ["2026-05-11T08:30:00Z", "2026-05-12T08:30:00Z", "2026-05-13T08:30:00Z"]),
    ("S12", {"calendar": [{"day_of_week": "5-7"}]}, "2026-05-04T00:00:00Z",
     ["2026-05-08T00:00:00Z", "2026-05-09T00:00:00Z", "2026-05-10T00:00:00Z"]),
    ("S13", {"calendar": [{"day_of_week": "tu,TH", "hour": "7"}]}, "2026-05-04T10:00:00Z",
     ["2026-05-05T07:00:00Z", "2026-05-07T07:00:00Z", "2026-05-12T07:00:00Z"]),
    ("S15", {"calendar": [{"day_of_month": "1-7", "day_of_week": "Mon", "hour": "9"}]}, "2026-05-04T10:00:00Z",
     ["2026-06-01T09:00:00Z", "2026-07-06T09:00:00Z", "2026-08-03T09:00:00Z"]),
    ("S16", {"calendar": [{"hour": "*", "minute": "0"}],
             "exclude_calendar": [{"hour": "12-13", "minute": "*", "second": "*"}]}, "2026-05-04T11:30:00Z",
     ["2026-05-04T14:00:00Z", "2026-05-04T15:00:00Z", "2026-05-04T16:00:00Z"]),
    ("S18", {"calendar": [{"hour": "*", "minute": "0"}],
             "exclude_calendar": [{"day_of_week": "Sat,Sun", "hour": "*", "minute": "*", "second": "*"}]},
     "2026-05-08T22:30:00Z", ["2026-05-08T23:00:00Z", "2026-05-11T00:00:00Z", "2026-05-11T01:00:00Z"]),
    ("S19", {"interval": [{"interval_ms": H}], "end_time_ms": ms("2026-05-04T13:00:00Z")}, "2026-05-04T11:30:00Z",
     ["2026-05-04T12:00:00Z", "2026-05-04T13:00:00Z", None]),
    ("S20", {"interval": [{"interval_ms": H}], "start_time_ms": ms("2026-05-04T15:00:00Z")}, "2026-05-04T10:00:00Z",
     ["2026-05-04T15:00:00Z", "2026-05-04T16:00:00Z", "2026-05-04T17:00:00Z"]),
    ("S21", {"interval": [{"interval_ms": H}], "start_time_ms": ms("2026-05-04T15:10:00Z")}, "2026-05-04T10:00:00Z",
     ["2026-05-04T16:00:00Z", "2026-05-04T17:00:00Z"]),
    ("S22", {"cron_string": ["CRON_TZ=America/New_York 30 2 * * *"]}, "2026-03-06T12:00:00Z",
     ["2026-03-07T07:30:00Z", "2026-03-09T06:30:00Z", "2026-03-10T06:30:00Z"]),
    ("S22-calendar", {"calendar": [{"hour": "2", "minute": "30"}], "timezone_name": "America/New_York"},
     "2026-03-06T12:00:00Z", ["2026-03-07T07:30:00Z", "2026-03-09T06:30:00Z", "2026-03-10T06:30:00Z"]),
    ("S24", {"cron_string": ["CRON_TZ=America/New_York 30 2 * * *"]}, "2026-10-31T12:00:00Z",
     ["2026-11-01T07:30:00Z", "2026-11-02T07:30:00Z", "2026-11-03T07:30:00Z"]),
    ("S26", {"calendar": [{"hour": "*", "minute": "30"}], "timezone_name": "America/New_York"},
     "2026-03-08T05:00:00Z",
     ["2026-03-08T05:30:00Z", "2026-03-08T06:30:00Z", "2026-03-08T07:30:00Z", "2026-03-08T08:30:00Z"]),
    ("S27", {"cron_string": ["CRON_TZ=Europe/London @daily"]}, "2026-03-28T12:00:00Z",
     ["2026-03-29T00:00:00Z", "2026-03-29T23:00:00Z", "2026-03-30T23:00:00Z"]),
    ("S29", {"cron_string": ["0 12 * * * 2027"]}, "2026-12-31T13:00:00Z",
     ["2027-01-01T12:00:00Z", "2027-01-02T12:00:00Z", "2027-01-03T12:00:00Z"]),
    ("S30", {"cron_string": ["*/20 * * * * * *"]}, "2026-05-04T10:00:05Z",
     ["2026-05-04T10:00:20Z", "2026-05-04T10:00:40Z", "2026-05-04T10:01:00Z"]),
    ("S31", {"cron_string": ["@weekly"]}, "2026-05-06T00:00:00Z",
     ["2026-05-10T00:00:00Z", "2026-05-17T00:00:00Z", "2026-05-24T00:00:00Z"]),
    ("S32", {"cron_string": ["@hourly # comment"]}, "2026-05-06T00:00:00Z",
     ["2026-05-06T01:00:00Z", "2026-05-06T02:00:00Z"]),
    ("S33", {"calendar": [{"hour": "9"}], "timezone_name": "Asia/Kolkata"}, "2026-05-04T00:00:00Z",
     ["2026-05-04T03:30:00Z", "2026-05-05T03:30:00Z", "2026-05-06T03:30:00Z"]),
    ("S34", {"cron_string": ["@every 5h"]}, "2026-05-04T08:00:00Z",
     ["2026-05-04T12:00:00Z", "2026-05-04T17:00:00Z", "2026-05-04T22:00:00Z"]),
    ("S36", {"calendar": [{"hour": "10", "minute": "45"}], "interval": [{"interval_ms": H}]}, "2026-05-04T10:00:00Z",
     ["2026-05-04T10:45:00Z", "2026-05-04T11:00:00Z", "2026-05-04T12:00:00Z"]),
    ("S38", {"calendar": [{"day_of_month": "31"}]}, "2026-01-31T00:00:00Z",
     ["2026-03-31T00:00:00Z", "2026-05-31T00:00:00Z", "2026-07-31T00:00:00Z"]),
    ("S39", {"calendar": [{"year": "2027-2028", "month": "6", "day_of_month": "1"}]}, "2026-01-01T00:00:00Z",
     ["2027-06-01T00:00:00Z", "2028-06-01T00:00:00Z", None]),
    ("S40", {"calendar": [{}]}, "2026-05-04T12:00:00Z", ["2026-05-05T00:00:00Z", "2026-05-06T00:00:00Z"]),
    ("S41", {"calendar": [{"day_of_week": "7", "hour": "6"}]}, "2026-05-04T00:00:00Z",
     ["2026-05-10T06:00:00Z", "2026-05-17T06:00:00Z"]),
    ("S49", {"structured_calendar": [{"hour": []}]}, "2026-05-04T00:00:00Z", [None]),
]


@pytest.mark.parametrize("spec,reference,expected", [v[1:] for v in VECTORS], ids=[v[0] for v in VECTORS])
def test_spec_vector(spec, reference, expected):
    compiled = compile_spec(spec)
    found = action_times(compiled, "", ms(reference), limit=len(expected))
    assert [iso(t.nominal_ms) for t in found] == [e for e in expected if e is not None]
    # No jitter: the actual time is the nominal one.
    assert all(t.actual_ms == t.nominal_ms for t in found)
    if expected[-1] is None:
        after = found[-1].actual_ms if found else ms(reference)
        assert next_action_time(compiled, "", after) is None


def test_S42_jitter_is_deterministic_from_seed_and_capped_by_the_interval():
    spec = compile_spec({"interval": [{"interval_ms": H}], "jitter_ms": 10 * M})
    found = action_times(spec, "ns-id-1-my-schedule", ms("2026-05-04T10:00:00Z"), limit=3)
    assert [(iso(t.nominal_ms), iso(t.actual_ms)) for t in found] == [
        ("2026-05-04T11:00:00Z", "2026-05-04T11:08:49.569Z"),
        ("2026-05-04T12:00:00Z", "2026-05-04T12:02:46.749Z"),
        ("2026-05-04T13:00:00Z", "2026-05-04T13:01:46.340Z"),
    ]


def test_S42_hash_input_bytes_and_fingerprint():
    from streamproc.semantics.schedule_jitter import go_time_binary, jitter_ms

    nominal_s = ms("2026-05-04T11:00:00Z") // 1000
    assert go_time_binary(nominal_s).hex() == "010000000ee18a733000000000ffff"
    from streamproc.semantics.farmhash32 import fingerprint32

    assert fingerprint32(go_time_binary(nominal_s) + b"ns-id-1-my-schedule") == 3790806063
    assert jitter_ms("ns-id-1-my-schedule", nominal_s, 600_000) == 529_569


def test_S44_empty_seed():
    spec = compile_spec({"interval": [{"interval_ms": H}], "jitter_ms": 10 * M})
    assert next_action_time(spec, "", ms("2026-05-04T10:00:00Z")) == ActionTime(
        ms("2026-05-04T11:00:00Z"), ms("2026-05-04T11:09:35.063Z"))


INVALID = [
    ("S45", {"cron_string": ["@every 1h/1h"]}, "phase cannot be greater than Interval"),
    ("S46", {"cron_string": ["0 12 * *"]}, "CronString does not have 5-7 fields"),
    ("S47", {"cron_string": ["0 12 * * ?"]}, "DayOfWeek is not in range [0-7]"),
    ("S48", {"calendar": [{"day_of_week": "Fri-Mon"}]}, "DayOfWeek End is before Start or not in range [0-7]"),
]


@pytest.mark.parametrize("spec,reason", [v[1:] for v in INVALID], ids=[v[0] for v in INVALID])
def test_invalid_spec_vector(spec, reason):
    with pytest.raises(ScheduleSpecError) as caught:
        compile_spec(spec)
    assert isinstance(caught.value, InvalidArgument)
    assert caught.value.reason == reason
    assert str(caught.value) == f"Invalid schedule spec: {reason}"


def test_S42_with_the_pure_python_hash(monkeypatch):
    from streamproc.semantics import farmhash32, schedule_jitter

    monkeypatch.setattr(schedule_jitter, "fingerprint32", farmhash32.fingerprint32)
    test_S42_jitter_is_deterministic_from_seed_and_capped_by_the_interval()
    test_S44_empty_seed()
