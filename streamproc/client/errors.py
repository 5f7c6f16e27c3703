"""Exceptions a workflow client raises, named and worded as Temporal's.

What ended a run is the ``cause`` of :class:`WorkflowFailureError`: an
``ApplicationError`` (the workflow failed), ``CancelledError``, ``TerminatedError`` or
``TimeoutError``: the failure exceptions activities use too, from
:mod:`streamproc.activity.errors`, re-exported here with the rest.
"""

from __future__ import annotations

import builtins

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


class RequestOutcomeUnknownError(builtins.TimeoutError):
    """A request's deadline passed without the engine's answer, and its command may have
    reached the log: it may have been applied, or may still be. Look the outcome up
    (its `request_id` is in the events it produced) instead of assuming it failed.

    ``delivered`` is True when a copy of the command is known to be on the log (the engine
    will process it), None when no copy is known either way (the broker was away). A copy
    still in the producer may reach the log until ``may_land_until`` (``time.time()``
    seconds; its message timeout), never later."""

    def __init__(self, message: str, *, intent: str, request_id: str, delivered: bool | None,
                 may_land_until: float) -> None:
        super().__init__(message)
        self.intent = intent
        self.request_id = request_id
        self.delivered = delivered
        self.may_land_until = may_land_until


class WorkflowStartOutcomeUnknownError(RequestOutcomeUnknownError):
    """A start without an answer that may have started the run: look it up with
    ``client.get_workflow_handle(workflow_id).describe()``, or start again with the same
    ``request_id``, which the engine answers with the run that request started."""

    def __init__(self, message: str, *, workflow_id: str, workflow_type: str, **kwargs) -> None:
        super().__init__(message, **kwargs)
        self.workflow_id = workflow_id
        self.workflow_type = workflow_type


class RequestNotSentError(Exception):
    """The command certainly never reached the log (the producer refused it, the broker
    refused it for good, or the topic could not be found before the deadline): nothing
    happened, and sending it again is safe."""

    def __init__(self, message: str, *, intent: str, request_id: str) -> None:
        super().__init__(message)
        self.intent = intent
        self.request_id = request_id


class WorkflowNotStartedError(RequestNotSentError):
    """The START never reached the log: no run was started by it."""

    def __init__(self, message: str, *, workflow_id: str, **kwargs) -> None:
        super().__init__(message, **kwargs)
        self.workflow_id = workflow_id


class CommandsNotDeliveredError(RuntimeError, builtins.TimeoutError):
    """`Client.flush` found commands that are not known to be on the log (a RuntimeError
    and a TimeoutError, what flush raised before for failed and for unfinished deliveries).

    ``unknown``: request ids (or ``key:<job key>`` for commands about an existing job) of
    commands that may be on the log or may still get there (a timed-out or unfinished
    delivery); look them up before sending them again. ``not_sent``: those certainly not
    on the log, with the reason; sending them again is safe."""

    def __init__(self, unknown: list[str], not_sent: dict[str, str]) -> None:
        parts = []
        if unknown:
            parts.append(f"{len(unknown)} with an unknown outcome (first {unknown[0]})")
        if not_sent:
            first = next(iter(not_sent.items()))
            parts.append(f"{len(not_sent)} not sent (first {first[0]}: {first[1]})")
        super().__init__("commands not delivered: " + "; ".join(parts))
        self.unknown = unknown
        self.not_sent = not_sent
