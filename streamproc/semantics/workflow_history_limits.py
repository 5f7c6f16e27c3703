"""History limits (SEMANTICS.md 6.3): when a running workflow's history is big enough to
suggest continue-as-new, to log a warning, or to be terminated."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from streamproc.semantics.workflow_events import SuggestContinueAsNewReason

__all__ = [
    "HISTORY_COUNT_EXCEEDS_LIMIT",
    "HISTORY_SIZE_EXCEEDS_LIMIT",
    "HistoryLimits",
    "DEFAULT_HISTORY_LIMITS",
    "LimitAction",
    "LimitVerdict",
    "check_history_limits",
]

#: ``WorkflowExecutionTerminated`` reasons (and ``InvalidArgument`` texts) at the limits.
HISTORY_COUNT_EXCEEDS_LIMIT = "Workflow history count exceeds limit."
HISTORY_SIZE_EXCEEDS_LIMIT = "Workflow history size exceeds limit."

_MIB = 1024 * 1024


@dataclass(frozen=True)
class HistoryLimits:
    """Per-namespace limits (``limit.*`` dynamic config), with the server's defaults."""

    count_error: int = 50 * 1024
    count_warn: int = 10 * 1024
    size_error_bytes: int = 50 * _MIB
    size_warn_bytes: int = 10 * _MIB
    count_suggest_continue_as_new: int = 4 * 1024
    size_suggest_continue_as_new_bytes: int = 4 * _MIB
    blob_size_error_bytes: int = 2 * _MIB
    mutable_state_size_error_bytes: int = 8 * _MIB
    pending_activities: int = 2_000
    pending_child_executions: int = 2_000
    pending_signals: int = 2_000
    pending_cancel_requests: int = 2_000
    max_id_length: int = 1_000


DEFAULT_HISTORY_LIMITS = HistoryLimits()


class LimitAction(IntEnum):
    """What a history's size calls for, least to most severe (with default limits the
    suggestion threshold is crossed first, then warn, then error)."""

    OK = 0
    SUGGEST_CONTINUE_AS_NEW = 1
    WARN = 2
    TERMINATE = 3


@dataclass(frozen=True)
class LimitVerdict:
    """The result of :func:`check_history_limits`.

    ``action`` is the most severe of the findings. ``termination_reason`` is set exactly
    when it is ``TERMINATE``: the run is terminated with that reason (identity
    ``history-service``), the transaction that crossed the limit is discarded, and the
    call that caused it gets ``InvalidArgument`` with the same text.
    """

    action: LimitAction
    termination_reason: str | None = None
    warn: bool = False
    suggest_continue_as_new: bool = False
    suggest_continue_as_new_reasons: tuple[SuggestContinueAsNewReason, ...] = ()


def check_history_limits(
    event_count: int, history_size_bytes: int, limits: HistoryLimits = DEFAULT_HISTORY_LIMITS
) -> LimitVerdict:
    """Compare a running workflow's history with its limits.

    ``event_count`` includes the events of the transaction being written (the server
    uses ``next_event_id - 1``); for the suggestion, computed when a workflow task
    starts, pass the ``WorkflowTaskStarted`` event's id. Error and warn thresholds are
    exceeded strictly (``>``); suggestion thresholds are reached (``>=``). Size is
    checked before count, so a history over both is terminated for its size.
    """
    reasons: list[SuggestContinueAsNewReason] = []
    if history_size_bytes >= limits.size_suggest_continue_as_new_bytes:
        reasons.append(SuggestContinueAsNewReason.HISTORY_SIZE_TOO_LARGE)
    if event_count >= limits.count_suggest_continue_as_new:
        reasons.append(SuggestContinueAsNewReason.TOO_MANY_HISTORY_EVENTS)
    termination_reason = None
    if history_size_bytes > limits.size_error_bytes:
        termination_reason = HISTORY_SIZE_EXCEEDS_LIMIT
    elif event_count > limits.count_error:
        termination_reason = HISTORY_COUNT_EXCEEDS_LIMIT
    warn = history_size_bytes > limits.size_warn_bytes or event_count > limits.count_warn
    if termination_reason is not None:
        action = LimitAction.TERMINATE
    elif warn:
        action = LimitAction.WARN
    elif reasons:
        action = LimitAction.SUGGEST_CONTINUE_AS_NEW
    else:
        action = LimitAction.OK
    return LimitVerdict(action, termination_reason, warn, bool(reasons), tuple(reasons))
