"""SWF timeout strings and their mapping to Temporal (SEMANTICS.md 9)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from streamproc.semantics import (
    SWF_ACTIVITY_RETRY_POLICY,
    SWF_MAXIMUM_DURATION,
    ActivityTimeouts,
    ApplicationFailure,
    InvalidArgument,
    RetryState,
    TimeoutType,
    activity_retry_decision,
    format_swf_timeout,
    normalize_activity_retry_policy,
    normalize_activity_timeouts,
    parse_swf_timeout,
    swf_activity_timeouts,
    swf_timeout_to_temporal,
    swf_workflow_run_timeout,
    timeout_type_from_swf,
    timeout_type_to_swf,
)
from tests.support.vector_times import S


@pytest.mark.parametrize(
    ("text", "expected"),
    [("NONE", None), ("0", timedelta(0)), ("300", 300 * S), ("99999999", 99_999_999 * S), ("00000042", 42 * S)],
)
def test_parse_valid(text: str, expected) -> None:
    assert parse_swf_timeout(text) == expected


@pytest.mark.parametrize("text", ["", "none", "None", "-1", "1.5", " 5", "5s", "123456789", "١٢"])
def test_parse_invalid(text: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        parse_swf_timeout(text, field="startToCloseTimeout")
    assert str(info.value).startswith("startToCloseTimeout must be a whole number of seconds")
    assert repr(text) in str(info.value)


def test_one_year_is_swf_hard_limit() -> None:
    assert SWF_MAXIMUM_DURATION == timedelta(seconds=31_536_000)


def test_format_round_trip() -> None:
    assert format_swf_timeout(None) == "NONE"
    assert format_swf_timeout(300 * S) == "300"
    for text in ("NONE", "0", "31536000", "99999999"):
        assert format_swf_timeout(parse_swf_timeout(text)) == text
    with pytest.raises(InvalidArgument):
        format_swf_timeout(timedelta(milliseconds=1500))
    with pytest.raises(InvalidArgument):
        format_swf_timeout(100_000_000 * S)


def test_none_maps_to_temporal_zero_and_zero_seconds_is_refused() -> None:
    assert swf_timeout_to_temporal("NONE") == timedelta(0)
    assert swf_timeout_to_temporal("45") == 45 * S
    with pytest.raises(InvalidArgument) as info:
        swf_timeout_to_temporal("0", field="heartbeatTimeout")
    assert "heartbeatTimeout of 0 seconds has no Temporal equivalent" in str(info.value)


def test_workflow_execution_timeout_required_and_not_none() -> None:
    assert swf_workflow_run_timeout("3600") == 3600 * S
    with pytest.raises(InvalidArgument) as info:
        swf_workflow_run_timeout("NONE")
    assert str(info.value) == "executionStartToCloseTimeout cannot be NONE"
    with pytest.raises(InvalidArgument):
        swf_workflow_run_timeout(None)


def test_activity_timeouts_map_one_to_one() -> None:
    requested = swf_activity_timeouts(
        schedule_to_start="60", schedule_to_close="600", start_to_close="300", heartbeat="30"
    )
    assert requested == ActivityTimeouts(
        schedule_to_close=600 * S, schedule_to_start=60 * S, start_to_close=300 * S, heartbeat=30 * S
    )
    assert normalize_activity_timeouts(requested) == requested


@pytest.mark.parametrize(
    ("missing", "cause"),
    [
        ("schedule_to_start", "DEFAULT_SCHEDULE_TO_START_TIMEOUT_UNDEFINED"),
        ("schedule_to_close", "DEFAULT_SCHEDULE_TO_CLOSE_TIMEOUT_UNDEFINED"),
        ("start_to_close", "DEFAULT_START_TO_CLOSE_TIMEOUT_UNDEFINED"),
    ],
)
def test_activity_timeouts_must_be_specified(missing: str, cause: str) -> None:
    values = {"schedule_to_start": "60", "schedule_to_close": "600", "start_to_close": "300"}
    values[missing] = None
    with pytest.raises(InvalidArgument) as info:
        swf_activity_timeouts(**values)
    assert cause in str(info.value)


def test_heartbeat_optional() -> None:
    requested = swf_activity_timeouts(schedule_to_start="NONE", schedule_to_close="NONE", start_to_close="300")
    assert requested == ActivityTimeouts(start_to_close=300 * S)


def test_all_none_uses_the_one_year_limit_as_schedule_to_close() -> None:
    requested = swf_activity_timeouts(schedule_to_start="NONE", schedule_to_close="NONE", start_to_close="NONE")
    assert normalize_activity_timeouts(requested) == ActivityTimeouts(
        schedule_to_close=SWF_MAXIMUM_DURATION,
        schedule_to_start=SWF_MAXIMUM_DURATION,
        start_to_close=SWF_MAXIMUM_DURATION,
    )


def test_swf_activities_are_never_retried_by_the_server() -> None:
    policy = normalize_activity_retry_policy(SWF_ACTIVITY_RETRY_POLICY)
    decision = activity_retry_decision(
        policy,
        attempt=1,
        failure=ApplicationFailure(type="Boom"),
        now=datetime(2026, 1, 1, tzinfo=timezone.utc),
        expiration=None,
    )
    assert decision.retry_state is RetryState.MAXIMUM_ATTEMPTS_REACHED


@pytest.mark.parametrize(
    ("name", "timeout_type"),
    [
        ("START_TO_CLOSE", TimeoutType.START_TO_CLOSE),
        ("SCHEDULE_TO_START", TimeoutType.SCHEDULE_TO_START),
        ("SCHEDULE_TO_CLOSE", TimeoutType.SCHEDULE_TO_CLOSE),
        ("HEARTBEAT", TimeoutType.HEARTBEAT),
    ],
)
def test_timeout_type_mapping(name: str, timeout_type: TimeoutType) -> None:
    assert timeout_type_from_swf(name) is timeout_type
    assert timeout_type_to_swf(timeout_type) == name
    assert int(timeout_type) == {"START_TO_CLOSE": 1, "SCHEDULE_TO_START": 2, "SCHEDULE_TO_CLOSE": 3, "HEARTBEAT": 4}[name]


def test_unknown_swf_timeout_type() -> None:
    with pytest.raises(InvalidArgument):
        timeout_type_from_swf("TIMEOUT_TYPE_HEARTBEAT")
    with pytest.raises(ValueError):
        timeout_type_to_swf(TimeoutType.UNSPECIFIED)
