"""The failure shapes the retry rules look at.

A small mirror of Temporal's ``Failure`` message: a message, an optional cause, and one
kind of failure info. Only the fields the semantics read are modelled. A plain
:class:`Failure` stands for any kind the rules do not single out (for example an
``ActivityFailure`` wrapper at the top of a workflow's failure), which is retryable.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from streamproc.semantics.enums import RetryState, TimeoutType

__all__ = [
    "Failure",
    "ApplicationFailure",
    "TimeoutFailure",
    "ServerFailure",
    "CanceledFailure",
    "TerminatedFailure",
    "ActivityFailure",
    "ChildWorkflowFailure",
]


@dataclass(frozen=True, kw_only=True)
class Failure:
    """A failure of no particular kind; ``cause`` is never inspected by the retry rules."""

    message: str = ""
    cause: Failure | None = None


@dataclass(frozen=True, kw_only=True)
class ApplicationFailure(Failure):
    """An error raised by user code (``ApplicationFailureInfo``).

    ``next_retry_delay`` is the worker's requested delay before the next attempt;
    ``None`` means not set, which differs from an explicit zero.
    """

    type: str = ""
    non_retryable: bool = False
    next_retry_delay: timedelta | None = None


@dataclass(frozen=True, kw_only=True)
class TimeoutFailure(Failure):
    """A timeout built by the server (``TimeoutFailureInfo``)."""

    timeout_type: TimeoutType
    last_heartbeat_details: Any = None


@dataclass(frozen=True, kw_only=True)
class ServerFailure(Failure):
    """An error produced by the server itself (``ServerFailureInfo``)."""

    non_retryable: bool = False


@dataclass(frozen=True, kw_only=True)
class CanceledFailure(Failure):
    """Cancellation (``CanceledFailureInfo``); never retried."""


@dataclass(frozen=True, kw_only=True)
class TerminatedFailure(Failure):
    """Termination (``TerminatedFailureInfo``); never retried."""


@dataclass(frozen=True, kw_only=True)
class ActivityFailure(Failure):
    """The SDK's wrapper around a failed activity, as seen by workflow code."""

    retry_state: RetryState = RetryState.UNSPECIFIED


@dataclass(frozen=True, kw_only=True)
class ChildWorkflowFailure(Failure):
    """The SDK's wrapper around a failed child workflow."""

    retry_state: RetryState = RetryState.UNSPECIFIED
