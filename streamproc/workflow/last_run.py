"""What a run learns from the run before it in its chain, as in Temporal's Python SDK.

A cron run is started with the result of the chain's last completed run and, after a
failure, that failure; a retry run with the failure of the attempt before it (and,
after a run timeout, the last completion result too). Both are read from the run's
WorkflowExecutionStarted, so every replay sees the same values.
"""

from __future__ import annotations

from typing import Any

from streamproc.activity.failures import exception_from_failure
from streamproc.workflow.runtime import current_runtime

__all__ = ["has_last_completion_result", "get_last_completion_result", "get_last_failure"]


def has_last_completion_result() -> bool:
    """Whether an earlier run of this cron chain completed and passed on its result."""
    return current_runtime().started_attributes.get("last_completion_result") is not None


def get_last_completion_result(type_hint: type | None = None) -> Any:
    """The result of the chain's last completed run, decoded (as `type_hint` if given);
    None if there is none (see `has_last_completion_result`)."""
    runtime = current_runtime()
    return runtime.converter.decode(runtime.started_attributes.get("last_completion_result"), type_hint)


def get_last_failure() -> BaseException | None:
    """The failure that ended the previous run (a failed cron run, or the attempt a
    retry run follows) as the exception it was, e.g. `ApplicationError` or a
    `TimeoutError` for a run timeout; None after a success or for a first run."""
    runtime = current_runtime()
    return exception_from_failure(runtime.started_attributes.get("continued_failure"), converter=runtime.converter)
