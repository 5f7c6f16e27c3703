"""The workflow runtime's exceptions (defined in :mod:`streamproc.exceptions`) and its
task-failure causes. Workflow code sees the same ``ApplicationError`` and
``ActivityError`` as activity callers do."""

from __future__ import annotations

from streamproc.exceptions import (
    ContinueAsNewError,
    NonDeterminismError,
    NondeterministicCallError,
    NotInWorkflowError,
    ReadOnlyContextError,
)

__all__ = [
    "NonDeterminismError",
    "ContinueAsNewError",
    "NondeterministicCallError",
    "NotInWorkflowError",
    "ReadOnlyContextError",
    "NON_DETERMINISTIC_ERROR",
    "WORKFLOW_WORKER_UNHANDLED_FAILURE",
]

#: Causes of a TASK_FAIL, Temporal's WorkflowTaskFailedCause names.
NON_DETERMINISTIC_ERROR = "NON_DETERMINISTIC_ERROR"
WORKFLOW_WORKER_UNHANDLED_FAILURE = "WORKFLOW_WORKER_UNHANDLED_FAILURE"
