"""Exceptions a workflow client raises, named and worded as Temporal's.

What ended a run is the ``cause`` of :class:`WorkflowFailureError`: an
``ApplicationError`` (the workflow failed), ``CancelledError``, ``TerminatedError`` or
``TimeoutError``: the failure exceptions activities use too. All are defined in
:mod:`streamproc.exceptions` and re-exported here, with `rejection_error`.
"""

from __future__ import annotations

from streamproc.exceptions import (
    ApplicationError,
    CancelledError,
    CommandRejectedError,
    CommandsNotDeliveredError,
    FailureError,
    InvalidArgument,
    RequestNotSentError,
    RequestOutcomeUnknownError,
    TerminatedError,
    TimeoutError,
    WorkflowAlreadyStartedError,
    WorkflowContinuedAsNewError,
    WorkflowFailureError,
    WorkflowNotFoundError,
    WorkflowNotStartedError,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
    WorkflowUpdateFailedError,
    WorkflowStartOutcomeUnknownError,
)
from streamproc.protocol.records import Record, RejectionType

__all__ = [
    "WorkflowAlreadyStartedError",
    "WorkflowFailureError",
    "WorkflowContinuedAsNewError",
    "WorkflowNotFoundError",
    "WorkflowQueryFailedError",
    "WorkflowQueryRejectedError",
    "WorkflowUpdateFailedError",
    "ApplicationError",
    "CancelledError",
    "TerminatedError",
    "TimeoutError",
    "FailureError",
    "CommandRejectedError",
    "InvalidArgument",
    "RequestOutcomeUnknownError",
    "WorkflowStartOutcomeUnknownError",
    "RequestNotSentError",
    "WorkflowNotStartedError",
    "CommandsNotDeliveredError",
    "rejection_error",
]


def rejection_error(record: Record) -> Exception:
    """The exception for a refused command that the caller has no better one for:
    `InvalidArgument` for bad arguments, else `CommandRejectedError` with type and reason."""
    reason = record.rejection_reason or ""
    if record.rejection_type == RejectionType.INVALID_ARGUMENT:
        return InvalidArgument(reason)
    return CommandRejectedError(record.rejection_type or "", reason)
