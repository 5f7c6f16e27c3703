"""The runtime of the workflow whose code is running: what every ``workflow.*`` call finds
through the running event loop."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from streamproc.workflow.errors import NotInWorkflowError
from streamproc.workflow.event_loop import WorkflowEventLoop

if TYPE_CHECKING:
    from streamproc.workflow.runtime import WorkflowRuntime

__all__ = ["current_runtime", "maybe_current_runtime"]


def current_runtime() -> WorkflowRuntime:
    """The runtime of the workflow whose code is running; raises outside workflow code."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if not isinstance(loop, WorkflowEventLoop):
        raise NotInWorkflowError("not in workflow code: workflow.* functions work only "
                                 "inside a workflow's run method and what it awaits")
    return loop.owner


def maybe_current_runtime() -> WorkflowRuntime | None:
    """The running workflow's runtime, or None outside workflow code."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    return loop.owner if isinstance(loop, WorkflowEventLoop) else None
