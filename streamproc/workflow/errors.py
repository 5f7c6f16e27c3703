"""Exceptions of the workflow runtime, beside the failure classes shared with activities.

Workflow code sees the same :class:`~streamproc.activity.errors.ApplicationError` and
:class:`~streamproc.activity.errors.ActivityError` as activity callers do; what is
particular to workflows is here.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "NonDeterminismError",
    "ContinueAsNewError",
    "NondeterministicCallError",
    "NotInWorkflowError",
    "NON_DETERMINISTIC_ERROR",
    "WORKFLOW_WORKER_UNHANDLED_FAILURE",
]

#: Causes of a TASK_FAIL, Temporal's WorkflowTaskFailedCause names.
NON_DETERMINISTIC_ERROR = "NON_DETERMINISTIC_ERROR"
WORKFLOW_WORKER_UNHANDLED_FAILURE = "WORKFLOW_WORKER_UNHANDLED_FAILURE"


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
