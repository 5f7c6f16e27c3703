"""History limits (SEMANTICS.md 6.3): defaults, thresholds and termination reasons."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamproc.semantics import (
    DEFAULT_HISTORY_LIMITS,
    HISTORY_COUNT_EXCEEDS_LIMIT,
    HISTORY_SIZE_EXCEEDS_LIMIT,
    HistoryLimits,
    LimitAction,
    LimitVerdict,
    SuggestContinueAsNewReason,
    check_history_limits,
)

MIB = 1024 * 1024


def test_default_limits() -> None:
    assert DEFAULT_HISTORY_LIMITS == HistoryLimits(
        count_error=51_200,
        count_warn=10_240,
        size_error_bytes=52_428_800,
        size_warn_bytes=10_485_760,
        count_suggest_continue_as_new=4_096,
        size_suggest_continue_as_new_bytes=4 * MIB,
        blob_size_error_bytes=2 * MIB,
        mutable_state_size_error_bytes=8 * MIB,
        pending_activities=2_000,
        pending_child_executions=2_000,
        pending_signals=2_000,
        pending_cancel_requests=2_000,
        max_id_length=1_000,
    )


COUNT = SuggestContinueAsNewReason.TOO_MANY_HISTORY_EVENTS
SIZE = SuggestContinueAsNewReason.HISTORY_SIZE_TOO_LARGE

LIMIT_VECTORS = [
    ("small", 100, MIB, LimitVerdict(LimitAction.OK)),
    ("count-just-below-suggest", 4_095, 0, LimitVerdict(LimitAction.OK)),
    ("count-reaches-suggest", 4_096, 0, LimitVerdict(LimitAction.SUGGEST_CONTINUE_AS_NEW, None, False, True, (COUNT,))),
    ("size-reaches-suggest", 10, 4 * MIB, LimitVerdict(LimitAction.SUGGEST_CONTINUE_AS_NEW, None, False, True, (SIZE,))),
    ("count-at-warn", 10_240, 0, LimitVerdict(LimitAction.SUGGEST_CONTINUE_AS_NEW, None, False, True, (COUNT,))),
    ("count-over-warn", 10_241, 0, LimitVerdict(LimitAction.WARN, None, True, True, (COUNT,))),
    ("size-over-warn", 10, 10 * MIB + 1, LimitVerdict(LimitAction.WARN, None, True, True, (SIZE,))),
    ("count-at-error", 51_200, 0, LimitVerdict(LimitAction.WARN, None, True, True, (COUNT,))),
    ("count-over-error", 51_201, 0, LimitVerdict(LimitAction.TERMINATE, "Workflow history count exceeds limit.", True, True, (COUNT,))),
    ("size-at-error", 10, 50 * MIB, LimitVerdict(LimitAction.WARN, None, True, True, (SIZE,))),
    ("size-over-error", 10, 50 * MIB + 1, LimitVerdict(LimitAction.TERMINATE, "Workflow history size exceeds limit.", True, True, (SIZE,))),
    ("both-over-error-size-wins", 60_000, 60 * MIB, LimitVerdict(LimitAction.TERMINATE, "Workflow history size exceeds limit.", True, True, (SIZE, COUNT))),
]  # fmt: skip


@pytest.mark.parametrize(
    ("event_count", "size", "expected"),
    [v[1:] for v in LIMIT_VECTORS],
    ids=[v[0] for v in LIMIT_VECTORS],
)
def test_history_limit_vectors(event_count, size, expected) -> None:
    assert check_history_limits(event_count, size) == expected


def test_termination_reasons_are_the_servers() -> None:
    assert HISTORY_COUNT_EXCEEDS_LIMIT == "Workflow history count exceeds limit."
    assert HISTORY_SIZE_EXCEEDS_LIMIT == "Workflow history size exceeds limit."


def test_custom_limits() -> None:
    limits = HistoryLimits(count_error=20, count_warn=10, count_suggest_continue_as_new=5)
    assert check_history_limits(21, 0, limits).termination_reason == HISTORY_COUNT_EXCEEDS_LIMIT
    assert check_history_limits(20, 0, limits).action is LimitAction.WARN


@given(st.integers(0, 100_000), st.integers(0, 100_000), st.integers(0, 80 * MIB))
def test_limit_action_grows_with_the_history(count_a, count_b, size) -> None:
    low, high = sorted((count_a, count_b))
    assert check_history_limits(low, size).action <= check_history_limits(high, size).action
    verdict = check_history_limits(high, size)
    assert (verdict.action is LimitAction.TERMINATE) == (verdict.termination_reason is not None)
