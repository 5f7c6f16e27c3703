"""Workflow ids: reuse and conflict policies, and what a start does when the id is taken
(SEMANTICS.md 4 and the id length limit of 6.3).

Only the *current* run of a workflow id matters. A start is resolved in this order:

0. the request id that started the current run comes back: the same run is returned
   (a client retrying its own start must not start a second run);
1. the current run is running: the conflict policy decides;
2. the current run is closed: the reuse policy decides.

Policies are defaulted and validated once, when the request is accepted
(:func:`normalize_workflow_id_policies`); the decision itself
(:func:`resolve_duplicate_workflow_id`) is taken against the partition's state.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, IntEnum

from streamproc.semantics.errors import InvalidArgument
from streamproc.semantics.temporal_enum import TemporalEnum

__all__ = [
    "MAX_ID_LENGTH",
    "TERMINATE_EXISTING_REASON",
    "HISTORY_SERVICE_IDENTITY",
    "WorkflowIdReusePolicy",
    "WorkflowIdConflictPolicy",
    "WorkflowExecutionStatus",
    "QueryRejectCondition",
    "AlreadyStarted",
    "WorkflowIdPolicies",
    "CurrentRun",
    "WorkflowIdAction",
    "WorkflowIdDecision",
    "validate_workflow_id",
    "normalize_workflow_id_policies",
    "resolve_duplicate_workflow_id",
]

#: ``limit.maxIDLength``: longest workflow id, in UTF-8 bytes (Go's ``len``).
MAX_ID_LENGTH = 1_000

#: Reason recorded on ``WorkflowExecutionTerminated`` when a start replaces a running run.
TERMINATE_EXISTING_REASON = "TerminateIfRunning WorkflowIdReusePolicy"

#: Identity the server signs its own terminations with.
HISTORY_SERVICE_IDENTITY = "history-service"


class WorkflowIdReusePolicy(TemporalEnum):
    """What a start may do when the id's current run is *closed*.

    ``TERMINATE_IF_RUNNING`` is deprecated: it is migrated to
    ``ALLOW_DUPLICATE`` + ``WorkflowIdConflictPolicy.TERMINATE_EXISTING``.
    """

    UNSPECIFIED = 0
    ALLOW_DUPLICATE = 1
    ALLOW_DUPLICATE_FAILED_ONLY = 2
    REJECT_DUPLICATE = 3
    TERMINATE_IF_RUNNING = 4


class WorkflowIdConflictPolicy(TemporalEnum):
    """What a start may do when the id's current run is *running*."""

    UNSPECIFIED = 0
    FAIL = 1
    USE_EXISTING = 2
    TERMINATE_EXISTING = 3


class WorkflowExecutionStatus(TemporalEnum):
    """The status of one run, with Temporal's numbers."""

    UNSPECIFIED = 0
    RUNNING = 1
    COMPLETED = 2
    FAILED = 3
    CANCELED = 4
    TERMINATED = 5
    CONTINUED_AS_NEW = 6
    TIMED_OUT = 7

    @property
    def is_running(self) -> bool:
        return self is WorkflowExecutionStatus.RUNNING

    @property
    def is_failed(self) -> bool:
        """Whether ``ALLOW_DUPLICATE_FAILED_ONLY`` lets a new run follow this one."""
        return self in _FAILED_STATUSES


_FAILED_STATUSES = frozenset(
    {
        WorkflowExecutionStatus.FAILED,
        WorkflowExecutionStatus.CANCELED,
        WorkflowExecutionStatus.TERMINATED,
        WorkflowExecutionStatus.TIMED_OUT,
    }
)


class AlreadyStarted(Exception):
    """``WorkflowExecutionAlreadyStarted`` (gRPC ``ALREADY_EXISTS``).

    ``run_id`` and ``start_request_id`` are those of the run that blocked the start,
    so a client can tell its own earlier start apart from someone else's.
    """

    def __init__(
        self, message: str, *, workflow_id: str, run_id: str, start_request_id: str = ""
    ) -> None:
        super().__init__(message)
        self.message = message
        self.workflow_id = workflow_id
        self.run_id = run_id
        self.start_request_id = start_request_id


def validate_workflow_id(workflow_id: str, *, max_length: int = MAX_ID_LENGTH) -> str:
    """Reject an empty workflow id or one longer than ``max_length`` UTF-8 bytes.

    Raises :class:`InvalidArgument` with the server's message, e.g.
    ``WorkflowId exceeds maximum allowed length (1001/1000)``.
    """
    if not workflow_id:
        raise InvalidArgument("WorkflowId is not set on request.")
    # The server measures bytes, so a non-ASCII id hits the limit sooner.
    length = len(workflow_id.encode("utf-8"))
    if length > max_length:
        raise InvalidArgument(
            f"WorkflowId exceeds maximum allowed length ({length}/{max_length})"
        )
    return workflow_id


_UNNORMALISED_REUSE = (
    WorkflowIdReusePolicy.UNSPECIFIED,
    WorkflowIdReusePolicy.TERMINATE_IF_RUNNING,
)


@dataclass(frozen=True)
class WorkflowIdPolicies:
    """Defaulted policies: neither is ``UNSPECIFIED``, reuse is never ``TERMINATE_IF_RUNNING``."""

    reuse: WorkflowIdReusePolicy
    conflict: WorkflowIdConflictPolicy


def normalize_workflow_id_policies(
    reuse: WorkflowIdReusePolicy = WorkflowIdReusePolicy.UNSPECIFIED,
    conflict: WorkflowIdConflictPolicy = WorkflowIdConflictPolicy.UNSPECIFIED,
    *,
    signal_with_start: bool = False,
) -> WorkflowIdPolicies:
    """Validate the policies of a start request as given, then fill in defaults.

    Validation sees the raw values, as the frontend does. Defaults: an unset conflict
    policy becomes ``FAIL`` for StartWorkflowExecution and ``USE_EXISTING`` for
    SignalWithStartWorkflowExecution (a signal should reach the running run), except
    that ``TERMINATE_IF_RUNNING`` becomes (``ALLOW_DUPLICATE``, ``TERMINATE_EXISTING``);
    an unset reuse policy becomes ``ALLOW_DUPLICATE``.

    Raises :class:`InvalidArgument` with the server's message.
    """
    reuse = WorkflowIdReusePolicy(reuse)
    conflict = WorkflowIdConflictPolicy(conflict)
    if (
        reuse is WorkflowIdReusePolicy.TERMINATE_IF_RUNNING
        and conflict is not WorkflowIdConflictPolicy.UNSPECIFIED
    ):
        raise InvalidArgument(
            "Invalid WorkflowIDReusePolicy: WORKFLOW_ID_REUSE_POLICY_TERMINATE_IF_RUNNING"
            " cannot be used together with a WorkflowIDConflictPolicy"
        )
    if (
        reuse is WorkflowIdReusePolicy.REJECT_DUPLICATE
        and conflict is WorkflowIdConflictPolicy.TERMINATE_EXISTING
    ):
        raise InvalidArgument(
            "Invalid WorkflowIDReusePolicy: WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE"
            " cannot be used together with WorkflowIdConflictPolicy"
            " WORKFLOW_ID_CONFLICT_POLICY_TERMINATE_EXISTING"
        )
    if signal_with_start and conflict is WorkflowIdConflictPolicy.FAIL:
        # A signal-with-start that must start is not a thing: it would never signal.
        raise InvalidArgument(
            "Invalid WorkflowIDConflictPolicy: WORKFLOW_ID_CONFLICT_POLICY_FAIL"
            " is not supported for this operation."
        )
    if reuse is WorkflowIdReusePolicy.TERMINATE_IF_RUNNING:
        return WorkflowIdPolicies(
            WorkflowIdReusePolicy.ALLOW_DUPLICATE, WorkflowIdConflictPolicy.TERMINATE_EXISTING
        )
    if conflict is WorkflowIdConflictPolicy.UNSPECIFIED:
        conflict = (
            WorkflowIdConflictPolicy.USE_EXISTING
            if signal_with_start
            else WorkflowIdConflictPolicy.FAIL
        )
    if reuse is WorkflowIdReusePolicy.UNSPECIFIED:
        reuse = WorkflowIdReusePolicy.ALLOW_DUPLICATE
    return WorkflowIdPolicies(reuse, conflict)


@dataclass(frozen=True)
class CurrentRun:
    """The current run of a workflow id, as far as a new start is concerned."""

    run_id: str
    status: WorkflowExecutionStatus
    start_request_id: str = ""


class WorkflowIdAction(Enum):
    """What a start does about the id's current run."""

    START = "START"
    RETURN_EXISTING = "RETURN_EXISTING"
    TERMINATE_EXISTING_AND_START = "TERMINATE_EXISTING_AND_START"
    ALREADY_STARTED = "ALREADY_STARTED"


@dataclass(frozen=True)
class WorkflowIdDecision:
    """The outcome of :func:`resolve_duplicate_workflow_id`.

    * ``START``: start the new run; ``run_id`` is the new run's id.
    * ``RETURN_EXISTING``: start nothing and answer with the current run's ``run_id``;
      ``started`` is true for a repeated request (its earlier copy did start the run)
      and false for ``USE_EXISTING``.
    * ``TERMINATE_EXISTING_AND_START``: terminate the current run ``run_id`` with
      ``reason``, ``details`` and ``identity``, then start ``new_run_id`` in the same
      transaction.
    * ``ALREADY_STARTED``: reject; :meth:`error` builds the exception to return.
    """

    action: WorkflowIdAction
    workflow_id: str
    run_id: str
    started: bool = False
    new_run_id: str = ""
    reason: str = ""
    details: str = ""
    identity: str = ""
    message: str = ""
    start_request_id: str = ""

    def error(self) -> AlreadyStarted:
        """The :class:`AlreadyStarted` error of an ``ALREADY_STARTED`` decision."""
        if self.action is not WorkflowIdAction.ALREADY_STARTED:
            raise ValueError(f"a {self.action.value} decision carries no error")
        return AlreadyStarted(
            self.message,
            workflow_id=self.workflow_id,
            run_id=self.run_id,
            start_request_id=self.start_request_id,
        )


def resolve_duplicate_workflow_id(
    policies: WorkflowIdPolicies,
    *,
    workflow_id: str,
    request_id: str,
    new_run_id: str,
    current: CurrentRun | None,
) -> WorkflowIdDecision:
    """Decide what a start with ``request_id`` does, given the id's current run.

    ``policies`` must come from :func:`normalize_workflow_id_policies`; ``current`` is
    ``None`` when the id was never used (or its runs were deleted). ``new_run_id`` is
    the id the new run would get; it is quoted in the termination details.
    """
    if policies.reuse in _UNNORMALISED_REUSE or not policies.conflict:
        raise ValueError(f"policies must be normalised first, got {policies}")
    if current is None:
        return WorkflowIdDecision(WorkflowIdAction.START, workflow_id, new_run_id, started=True)
    if request_id and request_id == current.start_request_id:
        return WorkflowIdDecision(
            WorkflowIdAction.RETURN_EXISTING, workflow_id, current.run_id, started=True
        )

    def reject(message: str) -> WorkflowIdDecision:
        return WorkflowIdDecision(
            WorkflowIdAction.ALREADY_STARTED,
            workflow_id,
            current.run_id,
            message=message.format(workflow_id, current.run_id),
            start_request_id=current.start_request_id,
        )

    if current.status.is_running:
        if policies.conflict is WorkflowIdConflictPolicy.FAIL:
            return reject("Workflow execution is already running. WorkflowId: {}, RunId: {}.")
        if policies.conflict is WorkflowIdConflictPolicy.USE_EXISTING:
            return WorkflowIdDecision(WorkflowIdAction.RETURN_EXISTING, workflow_id, current.run_id)
        return WorkflowIdDecision(
            WorkflowIdAction.TERMINATE_EXISTING_AND_START,
            workflow_id,
            current.run_id,
            started=True,
            new_run_id=new_run_id,
            reason=TERMINATE_EXISTING_REASON,
            details=f"terminated by new runID: {new_run_id}",
            identity=HISTORY_SERVICE_IDENTITY,
        )
    if policies.reuse is WorkflowIdReusePolicy.REJECT_DUPLICATE:
        return reject(
            "Workflow execution already finished. WorkflowId: {}, RunId: {}."
            " Workflow Id reuse policy: reject duplicate workflow Id."
        )
    if (
        policies.reuse is WorkflowIdReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY
        and not current.status.is_failed
    ):
        return reject(
            "Workflow execution already finished successfully. WorkflowId: {}, RunId: {}."
            " Workflow Id reuse policy: allow duplicate workflow Id if last run failed."
        )
    return WorkflowIdDecision(WorkflowIdAction.START, workflow_id, new_run_id, started=True)


class QueryRejectCondition(IntEnum):
    """Temporal's QueryRejectCondition: which closed runs refuse queries."""

    UNSPECIFIED = 0
    NONE = 1
    NOT_OPEN = 2
    NOT_COMPLETED_CLEANLY = 3

    def rejects(self, status: WorkflowExecutionStatus) -> bool:
        if self is QueryRejectCondition.NOT_OPEN:
            return status is not WorkflowExecutionStatus.RUNNING
        if self is QueryRejectCondition.NOT_COMPLETED_CLEANLY:
            return status not in (WorkflowExecutionStatus.RUNNING, WorkflowExecutionStatus.COMPLETED)
        return False
