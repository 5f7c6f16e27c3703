"""Every exception a user of streamproc catches or raises, in one place, named as Temporal's.

    Exception
    ├── FailureError                      what ended an activity or a workflow, with its cause chain
    │   │                                 (through TemporalError, Temporal's base class)
    │   ├── ApplicationError              raised by user code to fail; non_retryable, details, type
    │   ├── CancelledError                an acknowledged cancellation
    │   ├── TimeoutError                  a timeout (its type: START_TO_CLOSE, HEARTBEAT, ...)
    │   ├── TerminatedError, ServerError
    │   ├── ActivityError                 a caller's view of a failed activity (cause: one of the above)
    │   ├── ChildWorkflowError            a parent's view of a child that did not complete (cause: why)
    │   ├── ActivityAlreadyStartedError   an activity id that is open already
    │   ├── WorkflowAlreadyStartedError   a workflow id taken under the id policies
    │   ├── WorkflowFailureError          a caller's view of a failed run (cause: one of the above)
    │   ├── WorkflowContinuedAsNewError, WorkflowNotFoundError
    │   ├── WorkflowUpdateFailedError     an update was rejected or its handler failed (cause: why)
    ├── AsyncActivityCancelledError       (a TemporalError) an async completion's heartbeat learnt of cancellation
    ├── WorkflowQueryFailedError          a query's handler failed, or no worker answered in time
    ├── WorkflowQueryRejectedError        the run's status met the query's reject condition
    ├── CommandRejectedError              the engine refused a command (rejection type and reason)
    │   ├── ScheduleAlreadyRunningError   a schedule id in use
    │   ├── ActivityNotFoundError         an async completion's attempt is over (timed out, retried, closed)
    │   └── WorkflowUpdateNotFoundError   an update handle's id the run does not know
    ├── RequestNotSentError               certainly not on the log: sending again is safe
    │   └── WorkflowNotStartedError
    ├── NonDeterminismError               workflow code no longer matches its history
    ├── ValueError
    │   └── InvalidArgument               a bad request field, the server's own words
    ├── RuntimeError
    │   ├── NondeterministicCallError, NotInWorkflowError
    │   ├── ReadOnlyContextError          a query handler tried to change the workflow
    │   └── CommandsNotDeliveredError     (also a TimeoutError) flush could not deliver everything
    └── builtins.TimeoutError
        └── RequestOutcomeUnknownError    no answer in time; it may have been applied
            └── WorkflowStartOutcomeUnknownError
    BaseException
    └── ContinueAsNewError                raised by workflow.continue_as_new, not an error

The modules `streamproc.activity.errors`, `streamproc.client.errors` and
`streamproc.workflow.errors` re-export these with their helpers; `InvalidArgument` is
defined by the pure semantics (`streamproc.semantics.errors`), which the engine checks with,
and the outcomes of a command's delivery (RequestNotSentError, RequestOutcomeUnknownError,
CommandsNotDeliveredError and their subclasses) by `streamproc.delivery_errors`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from streamproc.delivery_errors import (
    CommandsNotDeliveredError,
    RequestNotSentError,
    RequestOutcomeUnknownError,
    WorkflowNotStartedError,
    WorkflowStartOutcomeUnknownError,
)
from streamproc.semantics.enums import RetryState, TimeoutType
from streamproc.semantics.errors import InvalidArgument
from streamproc.unsupported import unsupported_names

__all__ = [
    "TemporalError",
    "FailureError",
    "ApplicationError",
    "CancelledError",
    "TimeoutError",
    "TerminatedError",
    "ServerError",
    "ActivityError",
    "ActivityAlreadyStartedError",
    "ChildWorkflowError",
    "CommandRejectedError",
    "WorkflowAlreadyStartedError",
    "WorkflowFailureError",
    "WorkflowContinuedAsNewError",
    "WorkflowNotFoundError",
    "RequestOutcomeUnknownError",
    "WorkflowStartOutcomeUnknownError",
    "RequestNotSentError",
    "WorkflowNotStartedError",
    "CommandsNotDeliveredError",
    "NonDeterminismError",
    "ContinueAsNewError",
    "NondeterministicCallError",
    "NotInWorkflowError",
    "ReadOnlyContextError",
    "WorkflowQueryFailedError",
    "WorkflowQueryRejectedError",
    "WorkflowUpdateFailedError",
    "ScheduleAlreadyRunningError",
    "ActivityNotFoundError",
    "WorkflowUpdateNotFoundError",
    "AsyncActivityCancelledError",
    "InvalidArgument",
    "RetryState",
    "TimeoutType",
    "is_cancelled_exception",
]


class TemporalError(Exception):
    """The base of the failures below, as Temporal's (``except TemporalError`` catches them)."""


class FailureError(TemporalError):
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


class ChildWorkflowError(FailureError):
    """A child workflow did not complete: ``cause`` is how it ended (an ApplicationError,
    CancelledError, TimeoutError or TerminatedError), ``retry_state`` why it stopped."""

    def __init__(self, message: str, *, workflow_id: str, run_id: str, workflow_type: str,
                 retry_state: RetryState | None = None) -> None:
        super().__init__(message)
        self.workflow_id = workflow_id
        self.run_id = run_id
        self.workflow_type = workflow_type
        self.retry_state = retry_state


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


class ScheduleAlreadyRunningError(CommandRejectedError):
    """A schedule with that id exists already (Temporal's name)."""

    def __init__(self, reason: str = "schedule with this ID is already registered") -> None:
        super().__init__("ALREADY_EXISTS", reason)


class ActivityNotFoundError(CommandRejectedError):
    """An asynchronous completion (`AsyncActivityHandle`) named an attempt the engine no
    longer runs: it timed out or was retried (a task token names one attempt), the activity
    closed, its workflow closed, or no open activity has that id. Temporal answers
    these with an RPCError whose status is NOT_FOUND; ``rejection_type`` is "NOT_FOUND"."""

    def __init__(self, reason: str) -> None:
        super().__init__("NOT_FOUND", reason)


class WorkflowUpdateNotFoundError(CommandRejectedError):
    """An update handle (`get_update_handle(id)`) named an update id the run does not know:
    never sent to it, or rejected by its validator (a rejected update leaves nothing).
    Temporal answers with an RPCError whose status is NOT_FOUND and the same words,
    ``update "<id>" not found``; ``rejection_type`` is "NOT_FOUND"."""

    def __init__(self, reason: str) -> None:
        super().__init__("NOT_FOUND", reason)


class AsyncActivityCancelledError(TemporalError):
    """A heartbeat through an `AsyncActivityHandle` learnt that cancellation of the activity
    was requested: stop the work and call ``report_cancellation()`` (Temporal's name)."""

    def __init__(self) -> None:
        super().__init__("Activity cancelled")


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


class WorkflowUpdateFailedError(FailureError):
    """An update did not succeed: its validator rejected it, its handler raised, or the run
    ended first. ``cause`` is the failure (an ApplicationError, usually)."""

    def __init__(self, *, cause: BaseException | None, update_id: str = "", update_name: str = "") -> None:
        super().__init__("Workflow update failed")
        self.__cause__ = cause
        self.update_id = update_id
        self.update_name = update_name


class WorkflowContinuedAsNewError(FailureError):
    """The run continued as new and the caller asked not to follow runs."""

    def __init__(self, new_execution_run_id: str) -> None:
        super().__init__("Workflow continued as new")
        self.new_execution_run_id = new_execution_run_id


class WorkflowNotFoundError(FailureError):
    """No run of that workflow id (and run id) is known to the engine."""


class NonDeterminismError(Exception):
    """The workflow code issued commands that differ from the ones its history recorded.

    The message starts with Temporal's error code ``[TMPRL1100]`` so operators can search
    for it the way they would on Temporal.
    """

    def __init__(self, detail: str) -> None:
        super().__init__(f"[TMPRL1100] Nondeterminism error: {detail}")
        self.detail = detail


class ContinueAsNewError(BaseException):
    """Raised by ``workflow.continue_as_new``: ends the run and starts the next one.

    A BaseException, as Temporal's, so that ``except Exception`` in workflow code does not
    swallow it by accident.
    """

    def __init__(self, args: tuple[Any, ...], *, workflow_type: str | None,
                 task_queue: str | None, run_timeout_ms: int, task_timeout_ms: int) -> None:
        super().__init__("continue as new")
        self.input_args = args
        self.workflow_type = workflow_type
        self.task_queue = task_queue
        self.run_timeout_ms = run_timeout_ms
        self.task_timeout_ms = task_timeout_ms


class NondeterministicCallError(RuntimeError):
    """Workflow code called something that depends on real time, threads or I/O."""


class NotInWorkflowError(RuntimeError):
    """A ``workflow.*`` function was called outside workflow code."""


class ReadOnlyContextError(RuntimeError):
    """Code that may only read the workflow's state (a query handler) tried to change it:
    issue a command, draw a random number, check a patch."""


class WorkflowQueryFailedError(Exception):
    """A query was not answered: its handler raised (the message says what), no handler
    takes its name, the worker could not replay the run, or no worker answered in time."""


class WorkflowQueryRejectedError(Exception):
    """The run's status met the query's reject condition; ``status`` is that status."""

    def __init__(self, status: Any) -> None:
        super().__init__(f"Query rejected, status: {getattr(status, 'name', status)}")
        self.status = status


def is_cancelled_exception(exception: BaseException) -> bool:
    """Whether `exception` means "cancelled", as Temporal's: an asyncio cancellation, a
    CancelledError, or an activity or child workflow error caused by one."""
    if isinstance(exception, (asyncio.CancelledError, CancelledError)):
        return True
    return isinstance(exception, (ActivityError, ChildWorkflowError)) and isinstance(exception.cause, CancelledError)


__getattr__ = unsupported_names(__name__, {
    "ApplicationErrorCategory": "application error categories",
    "NexusOperationError": "Nexus operations",
    "NexusOperationAlreadyStartedError": "Nexus operations",
})
