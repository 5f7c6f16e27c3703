"""Durations and times in whole milliseconds, as records carry them: the same as dividing
by a millisecond (floored, or rounded up for `ceil_ms`), for any timedelta."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st

from streamproc.protocol.wire_values import EPOCH, ceil_ms, to_datetime, to_ms, whole_ms

ONE_MS = timedelta(milliseconds=1)
DURATIONS = st.timedeltas(min_value=timedelta(days=-36_500), max_value=timedelta(days=36_500))


@given(DURATIONS)
def test_whole_and_rounded_up_milliseconds_are_the_divisions_by_a_millisecond(value):
    assert whole_ms(value) == value // ONE_MS and to_ms(value) == value // ONE_MS
    assert ceil_ms(value) == -(-value // ONE_MS)
    assert to_ms(EPOCH + value) == value // ONE_MS


@given(st.integers(-(10**13), 10**14))  # years 1653 to 5138
def test_a_time_in_milliseconds_round_trips(ms):
    assert to_ms(to_datetime(ms)) == ms
