"""Exceptions a workflow client raises, named and worded as Temporal's.

What ended a run is the ``cause`` of :class:`WorkflowFailureError`: an
``ApplicationError`` (the workflow failed), ``CancelledError``, ``TerminatedError`` or
``TimeoutError``: the failure exceptions activities use too, from
:mod:`streamproc.activity.errors`, re-exported here with the rest.
"""

from __future__ import annotations

from streamproc.activity.errors import (
    ApplicationError,
    CancelledError,
    CommandRejectedError,
    FailureError,
    InvalidArgument,
    TerminatedError,
    TimeoutError,
)
from streamproc.protocol.records import Record, RejectionType

__all__ = [
    "WorkflowAlreadyStartedError",
    "WorkflowFailureError",
    "WorkflowContinuedAsNewError",
    "WorkflowNotFoundError",
    "ApplicationError",
    "CancelledError",
    "TerminatedError",
    "TimeoutError",
    "FailureError",
    "CommandRejectedError",
    "InvalidArgument",
    "rejection_error",
]


def rejection_error(record: Record) -> Exception:
    """The exception for a refused command that the caller has no better one for:
    `InvalidArgument` for bad arguments, else `CommandRejectedError` with type and reason."""
    reason = record.rejection_reason or ""
    if record.rejection_type == RejectionType.INVALID_ARGUMENT:
        return InvalidArgument(reason)
    return CommandRejectedError(record.rejection_type or "", reason)


class WorkflowAlreadyStartedError(FailureError):
    """A start found the workflow id taken, e.g. ``Workflow execution is already running.
    WorkflowId: order-1, RunId: 9f....`` (the engine's message, as Temporal's server's)."""

    def __init__(self, message: str, *, workflow_id: str, workflow_type: str, run_id: str = "") -> None:
        super().__init__(message)
        self.workflow_id = workflow_id
        self.workflow_type = workflow_type
        self.run_id = run_id


class WorkflowFailureError(FailureError):
    """The run did not complete: ``cause`` says how it ended."""

    def __init__(self, *, cause: BaseException, workflow_id: str = "", run_id: str = "") -> None:
        super().__init__("Workflow execution failed")
        self.__cause__ = cause
        self.workflow_id = workflow_id
        self.run_id = run_id

    def __repr__(self) -> str:
        return f"WorkflowFailureError(workflow_id={self.workflow_id!r}, cause={self.cause!r})"


class WorkflowContinuedAsNewError(FailureError):
    """The run continued as new and the caller asked not to follow runs."""

    def __init__(self, new_execution_run_id: str) -> None:
        super().__init__("Workflow continued as new")
        self.new_execution_run_id = new_execution_run_id


class WorkflowNotFoundError(FailureError):
    """No run of that workflow id (and run id) is known to the engine."""
