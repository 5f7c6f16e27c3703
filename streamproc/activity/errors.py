"""Every exception an activity, a worker or a client raises on purpose, named as Temporal's.

An activity raises :class:`ApplicationError` (or anything else) to fail its attempt, and
:class:`CancelledError` to acknowledge a cancellation. A caller waiting for the result
gets :class:`ActivityError` whose ``cause`` is what ended the activity:
:class:`ApplicationError`, :class:`TimeoutError` or :class:`CancelledError`, each with
its own cause chain. ``InvalidArgument`` is the semantics' own class, so the client's
check and the engine's rejection raise the same exception with the same text.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from streamproc.semantics import InvalidArgument, RetryState, TimeoutType

__all__ = [
    "FailureError",
    "ApplicationError",
    "CancelledError",
    "TimeoutError",
    "TerminatedError",
    "ServerError",
    "ActivityError",
    "ActivityAlreadyStartedError",
    "CommandRejectedError",
    "InvalidArgument",
]


class FailureError(Exception):
    """A failure that travels between workers and callers as a FailureRecord.

    ``failure`` is the record it was decoded from (``None`` when raised locally);
    ``cause`` is ``__cause__``, the failure that led to this one.
    """

    def __init__(self, message: str, *, failure: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.failure = failure

    @property
    def cause(self) -> BaseException | None:
        return self.__cause__


class ApplicationError(FailureError):
    """Raised by activity code to fail the attempt with a type, details and retry hints.

    ``type`` defaults to the class name; a retry policy's ``non_retryable_error_types``
    matches it whole. ``non_retryable`` ends the activity whatever the policy says, and
    ``next_retry_delay`` replaces the policy's backoff for the next attempt.
    """

    def __init__(self, message: str, *details: Any, type: str | None = None,
                 non_retryable: bool = False, next_retry_delay: timedelta | None = None,
                 failure: dict[str, Any] | None = None) -> None:
        super().__init__(message, failure=failure)
        self.details: Sequence[Any] = details
        self.type = type
        self.non_retryable = non_retryable
        self.next_retry_delay = next_retry_delay

    def __repr__(self) -> str:
        return (f"ApplicationError({self.message!r}, type={self.type!r}, "
                f"non_retryable={self.non_retryable})")


class CancelledError(FailureError):
    """Raised inside a sync activity by ``activity.heartbeat()`` once the attempt is
    cancelled; raise it (or let it propagate) to report the activity canceled."""

    def __init__(self, message: str = "Cancelled", *details: Any,
                 failure: dict[str, Any] | None = None) -> None:
        super().__init__(message, failure=failure)
        self.details: Sequence[Any] = details


class TimeoutError(FailureError):  # noqa: A001 - Temporal's name, on purpose
    """An activity timer fired: ``type`` says which, ``last_heartbeat_details`` what the
    last heartbeat of the attempt carried."""

    def __init__(self, message: str, *, type: TimeoutType | None = None,
                 last_heartbeat_details: Sequence[Any] = (),
                 failure: dict[str, Any] | None = None) -> None:
        super().__init__(message, failure=failure)
        self.type = type
        self.last_heartbeat_details = last_heartbeat_details


class TerminatedError(FailureError):
    """The execution was terminated."""


class ServerError(FailureError):
    """The engine itself failed the activity."""

    def __init__(self, message: str, *, non_retryable: bool = False,
                 failure: dict[str, Any] | None = None) -> None:
        super().__init__(message, failure=failure)
        self.non_retryable = non_retryable


class ActivityError(FailureError):
    """The activity closed without a result; ``cause`` says why, ``retry_state`` why no
    further attempt was made."""

    def __init__(self, message: str, *, activity_id: str, activity_type: str,
                 scheduled_event_id: int, started_event_id: int, identity: str,
                 retry_state: RetryState) -> None:
        super().__init__(message)
        self.activity_id = activity_id
        self.activity_type = activity_type
        self.scheduled_event_id = scheduled_event_id
        self.started_event_id = started_event_id
        self.identity = identity
        self.retry_state = retry_state

    def __repr__(self) -> str:
        return (f"ActivityError({self.message!r}, activity_id={self.activity_id!r}, "
                f"retry_state={self.retry_state.name}, cause={self.cause!r})")


class ActivityAlreadyStartedError(FailureError):
    """An open activity already has this activity id."""

    def __init__(self, message: str, *, activity_id: str) -> None:
        super().__init__(message)
        self.activity_id = activity_id


class CommandRejectedError(Exception):
    """The engine refused a command for a reason other than an invalid argument
    (``NOT_FOUND``, ``INVALID_STATE`` ...): e.g. cancelling an activity that has closed."""

    def __init__(self, rejection_type: str, reason: str) -> None:
        super().__init__(f"{rejection_type}: {reason}")
        self.rejection_type = rejection_type
        self.reason = reason
