"""Overlap policies, the start buffer and the catch-up window (SEMANTICS.md 8.6, 8.12).

A schedule's due actions wait in a buffer; ``process_buffer`` decides, each time the
schedule wakes, which start now, which stay buffered until the running workflow closes,
which are skipped, and whether the running workflow must be cancelled or terminated
first. It is Temporal's ``ProcessBuffer``, including its corner cases.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from streamproc.semantics.errors import InvalidArgument

__all__ = [
    "BUFFER_CAPACITY",
    "DEFAULT_CATCHUP_WINDOW_MS",
    "MIN_CATCHUP_WINDOW_MS",
    "POLICY_BY_NUMBER",
    "BufferOutcome",
    "BufferedStart",
    "ScheduleOverlapPolicy",
    "normalize_catchup_window_ms",
    "outside_catchup_window",
    "process_buffer",
    "resolve_overlap_policy",
]

#: Buffered starts beyond this are dropped (``buffer_dropped``); backfills may use half.
BUFFER_CAPACITY = 1000
DEFAULT_CATCHUP_WINDOW_MS = 365 * 24 * 3600 * 1000
MIN_CATCHUP_WINDOW_MS = 10_000


class ScheduleOverlapPolicy(IntEnum):
    UNSPECIFIED = 0
    SKIP = 1
    BUFFER_ONE = 2
    BUFFER_ALL = 3
    CANCEL_OTHER = 4
    TERMINATE_OTHER = 5
    ALLOW_ALL = 6


#: The policies by number: `ScheduleOverlapPolicy(n)` is a Python-level call through the enum's
#: metaclass, asked for every buffered start of every pass.
POLICY_BY_NUMBER: dict[int, ScheduleOverlapPolicy] = {int(p): p for p in ScheduleOverlapPolicy}
_UNSPECIFIED = ScheduleOverlapPolicy.UNSPECIFIED


@dataclass(frozen=True)
class BufferedStart:
    """One due action. ``overlap`` UNSPECIFIED means "the schedule's policy", looked up
    when the buffer is processed, so a policy update also applies to waiting starts."""

    nominal_ms: int
    actual_ms: int
    overlap: ScheduleOverlapPolicy = ScheduleOverlapPolicy.UNSPECIFIED
    manual: bool = False


@dataclass(frozen=True)
class BufferOutcome:
    """What to do now. ``start`` lists every start in buffer order; the ones also in
    ``untracked`` are ALLOW_ALL starts, which never count as "running" (``tracked_start``
    is the one that does)."""

    start: tuple[BufferedStart, ...]
    new_buffer: tuple[BufferedStart, ...]
    overlap_skipped: int
    need_cancel: bool
    need_terminate: bool
    untracked: tuple[BufferedStart, ...] = ()
    tracked_start: BufferedStart | None = None


def resolve_overlap_policy(own: ScheduleOverlapPolicy,
                           schedule_overlap: ScheduleOverlapPolicy) -> ScheduleOverlapPolicy:
    """A start's own policy, else the schedule's, else SKIP."""
    for policy in (own, schedule_overlap):
        if policy != _UNSPECIFIED:
            return POLICY_BY_NUMBER[policy]
    return ScheduleOverlapPolicy.SKIP


def process_buffer(buffer, *, running: bool, schedule_overlap: ScheduleOverlapPolicy) -> BufferOutcome:
    """Temporal's ``ProcessBuffer(buffer, isRunning)``, walking the buffer in order."""
    policy_of = ScheduleOverlapPolicy
    items = tuple(buffer)
    chosen: int | None = None  # indexes, so equal starts stay distinct
    allow_all: list[int] = []
    kept: list[BufferedStart] = []
    skipped = 0
    need_cancel = need_terminate = False
    for index, item in enumerate(items):
        policy = resolve_overlap_policy(item.overlap, schedule_overlap)
        if policy == policy_of.ALLOW_ALL:
            allow_all.append(index)
            continue
        if not running and chosen is None:
            chosen = index  # nothing runs: the first one starts, whatever its policy
            continue
        if policy == policy_of.SKIP:
            skipped += 1
        elif policy == policy_of.BUFFER_ONE:
            if kept:
                skipped += 1
            else:
                kept.append(item)
        elif policy == policy_of.BUFFER_ALL:
            kept.append(item)
        elif policy in (policy_of.CANCEL_OTHER, policy_of.TERMINATE_OTHER):
            if running:
                # Ask the running workflow to go, and start this one once it has closed.
                if policy == policy_of.CANCEL_OTHER:
                    need_cancel = True
                else:
                    need_terminate = True
                kept.append(item)
            else:
                # Only the start chosen above "runs": replace it, without counting a skip.
                chosen = index
    if need_cancel or need_terminate:
        # They would be cancelled or terminated straight away too: do not start them.
        allow_all = []
    started = sorted(allow_all + ([] if chosen is None else [chosen]))
    return BufferOutcome(
        start=tuple(items[i] for i in started),
        new_buffer=tuple(kept),
        overlap_skipped=skipped,
        need_cancel=need_cancel,
        need_terminate=need_terminate,
        untracked=tuple(items[i] for i in allow_all),
        tracked_start=None if chosen is None else items[chosen],
    )


def normalize_catchup_window_ms(window_ms: int | None) -> int:
    """Unset or 0 means one year; positive values below 10 s are raised to 10 s."""
    if window_ms is None or window_ms == 0:
        return DEFAULT_CATCHUP_WINDOW_MS
    if window_ms < 0:
        raise InvalidArgument(f"catchup_window must be >= 0, got {window_ms} ms")
    return max(window_ms, MIN_CATCHUP_WINDOW_MS)


def outside_catchup_window(now_ms: int, actual_ms: int, window_ms: int) -> bool:
    """Whether an automatic action due at ``actual_ms`` (jittered) is too late to take."""
    return now_ms - actual_ms > window_ms
