"""Overlap policies and the start buffer: every vector of SEMANTICS.md 8.12 (B1-B10), the
replace-the-chosen-start corner cases of 8.6, and the catch-up window."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamproc.semantics import (
    BUFFER_CAPACITY,
    BufferedStart,
    InvalidArgument,
    ScheduleOverlapPolicy,
    action_times,
    compile_spec,
    normalize_catchup_window_ms,
    outside_catchup_window,
    process_buffer,
)

P = ScheduleOverlapPolicy
A, B, C = (BufferedStart(n * 3_600_000, n * 3_600_000) for n in (1, 2, 3))

BUFFER_VECTORS = [
    # id, schedule policy, running, buffer, started, new buffer, skipped, cancel, terminate
    ("B1", P.SKIP, True, [A], [], [], 1, False, False),
    ("B2", P.SKIP, False, [A, B], [A], [], 1, False, False),
    ("B3", P.BUFFER_ONE, True, [A, B, C], [], [A], 2, False, False),
    ("B5", P.BUFFER_ALL, True, [A, B], [], [A, B], 0, False, False),
    ("B6", P.CANCEL_OTHER, True, [A], [], [A], 0, True, False),
    ("B8", P.TERMINATE_OTHER, True, [A], [], [A], 0, False, True),
    ("B9", P.ALLOW_ALL, True, [A, B], [A, B], [], 0, False, False),
]


@pytest.mark.parametrize("policy,running,buffer,started,kept,skipped,cancel,terminate",
                         [v[1:] for v in BUFFER_VECTORS], ids=[v[0] for v in BUFFER_VECTORS])
def test_buffer_vector(policy, running, buffer, started, kept, skipped, cancel, terminate):
    outcome = process_buffer(buffer, running=running, schedule_overlap=policy)
    assert list(outcome.start) == started
    assert list(outcome.new_buffer) == kept
    assert outcome.overlap_skipped == skipped
    assert (outcome.need_cancel, outcome.need_terminate) == (cancel, terminate)


def test_B9_allow_all_starts_are_not_tracked_as_running():
    outcome = process_buffer([A, B], running=True, schedule_overlap=P.ALLOW_ALL)
    assert outcome.untracked == (A, B) and outcome.tracked_start is None


def test_B10_outage_with_skip_starts_the_first_caught_up_action_and_skips_the_rest():
    spec = compile_spec({"interval": [{"interval_ms": 3_600_000}]})
    down_ms, up_ms = 10 * 3_600_000 + 1_800_000, 14 * 3_600_000 + 600_000  # 10:30 -> 14:10 (day 0)
    window = normalize_catchup_window_ms(None)
    due = [t for t in action_times(spec, "", down_ms, limit=100, until_ms=up_ms)
           if not outside_catchup_window(up_ms, t.actual_ms, window)]
    assert [t.nominal_ms // 3_600_000 for t in due] == [11, 12, 13, 14]
    outcome = process_buffer([BufferedStart(t.nominal_ms, t.actual_ms) for t in due],
                             running=False, schedule_overlap=P.SKIP)
    assert [s.nominal_ms // 3_600_000 for s in outcome.start] == [11]
    assert outcome.overlap_skipped == 3 and outcome.new_buffer == ()


def test_unspecified_everywhere_resolves_to_skip_late():
    assert process_buffer([A, B], running=True, schedule_overlap=P.UNSPECIFIED).overlap_skipped == 2
    # A start's own policy (trigger/backfill override) wins over the schedule's.
    own = BufferedStart(A.nominal_ms, A.actual_ms, overlap=P.BUFFER_ALL, manual=True)
    assert process_buffer([own], running=True, schedule_overlap=P.SKIP).new_buffer == (own,)


@pytest.mark.parametrize("policy", [P.CANCEL_OTHER, P.TERMINATE_OTHER])
def test_cancel_or_terminate_with_nothing_running_replaces_the_chosen_start(policy):
    outcome = process_buffer([A, B, C], running=False, schedule_overlap=policy)
    assert outcome.start == (C,) and outcome.tracked_start == C
    assert outcome.overlap_skipped == 0 and outcome.new_buffer == ()
    assert not (outcome.need_cancel or outcome.need_terminate)


def test_allow_all_starts_are_dropped_when_a_cancel_is_needed():
    allow = BufferedStart(B.nominal_ms, B.actual_ms, overlap=P.ALLOW_ALL)
    outcome = process_buffer([A, allow], running=True, schedule_overlap=P.CANCEL_OTHER)
    assert outcome.start == () and outcome.untracked == () and outcome.new_buffer == (A,)
    assert outcome.need_cancel


def test_both_cancel_and_terminate_can_be_requested():
    terminate = BufferedStart(B.nominal_ms, B.actual_ms, overlap=P.TERMINATE_OTHER)
    outcome = process_buffer([A, terminate], running=True, schedule_overlap=P.CANCEL_OTHER)
    assert outcome.need_cancel and outcome.need_terminate and outcome.new_buffer == (A, terminate)


def test_equal_starts_stay_distinct():
    outcome = process_buffer([A, A], running=False, schedule_overlap=P.BUFFER_ALL)
    assert outcome.start == (A,) and outcome.new_buffer == (A,)


policies = st.sampled_from(list(P))
starts = st.builds(BufferedStart, st.integers(0, 10**6), st.integers(0, 10**6), policies, st.booleans())


@given(st.lists(starts, max_size=12), st.booleans(), policies)
def test_every_start_is_started_kept_skipped_or_replaced_exactly_once(buffer, running, policy):
    outcome = process_buffer(buffer, running=running, schedule_overlap=policy)
    tracked = [outcome.tracked_start] if outcome.tracked_start is not None else []
    assert len(tracked) <= 1 and not (running and tracked)
    assert sorted(map(repr, outcome.start)) == sorted(map(repr, tracked + list(outcome.untracked)))
    accounted = len(outcome.start) + len(outcome.new_buffer) + outcome.overlap_skipped
    assert accounted <= len(buffer)  # the rest were replaced, or ALLOW_ALLs dropped for a cancel


def test_catchup_window_defaults_and_minimum():
    year_ms = 365 * 24 * 3_600_000
    assert normalize_catchup_window_ms(None) == normalize_catchup_window_ms(0) == year_ms
    assert normalize_catchup_window_ms(1) == 10_000
    assert normalize_catchup_window_ms(3_600_000) == 3_600_000
    with pytest.raises(InvalidArgument, match="-5"):
        normalize_catchup_window_ms(-5)
    assert outside_catchup_window(now_ms=20_001, actual_ms=10_000, window_ms=10_000)
    assert not outside_catchup_window(now_ms=20_000, actual_ms=10_000, window_ms=10_000)
    assert BUFFER_CAPACITY == 1000
