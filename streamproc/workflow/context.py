"""What workflow code may ask about its run: identity, time, randomness, patches.

Each of these returns the same value on every replay of the same history, which is why
workflow code must use them instead of ``datetime.now()``, ``random`` or ``uuid``.
"""

from __future__ import annotations

import random as _random
import uuid
from datetime import UTC, datetime, timedelta
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from streamproc.protocol.wire_values import ceil_ms
from streamproc.workflow.definition import workflow_type_of
from streamproc.workflow.errors import ContinueAsNewError
from streamproc.workflow.run_info import Info
from streamproc.workflow.current import maybe_current_runtime
from streamproc.workflow.runtime import current_runtime

__all__ = ["info", "in_workflow", "now", "time", "time_ns", "random", "uuid4", "is_replaying", "patched", "deprecate_patch",
           "continue_as_new", "set_signal_handler", "set_dynamic_signal_handler", "set_query_handler",
           "set_dynamic_query_handler", "all_handlers_finished"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def info() -> Info:
    """The run's id, type, task queue, attempt and timeouts."""
    return current_runtime().info


def now() -> datetime:
    """The time of the current workflow task (when the engine scheduled it), in UTC."""
    return _EPOCH + timedelta(milliseconds=current_runtime().now_ms)


def time() -> float:
    """`now()` as seconds since the epoch (Temporal's ``workflow.time``)."""
    return current_runtime().now_ms / 1000


def time_ns() -> int:
    """`now()` as nanoseconds since the epoch (Temporal's ``workflow.time_ns``)."""
    return current_runtime().now_ms * 1_000_000


def in_workflow() -> bool:
    """Whether this code runs in a workflow (Temporal's ``workflow.in_workflow``)."""
    return maybe_current_runtime() is not None


def random() -> _random.Random:
    """A random number generator seeded from the run, so replays draw the same numbers."""
    runtime = current_runtime()
    runtime.assert_writable("random")
    return runtime.random


def uuid4() -> uuid.UUID:
    """A version 4 UUID from the run's generator: the same one on every replay."""
    return current_runtime().uuid4()


def is_replaying() -> bool:
    """True while the code re-executes a part of the run that history already records
    (e.g. to skip logging twice). Never branch the workflow's commands on it."""
    return current_runtime().replaying


def patched(patch_id: str) -> bool:
    """Whether to take the new code path named `patch_id`.

    True on first execution (a ``patch`` marker is recorded), and on replay only if the
    history recorded that marker at this point; so runs started before the change keep
    replaying the old path. The answer is fixed for the rest of the run.
    """
    return current_runtime().patched(patch_id, deprecated=False)


def deprecate_patch(patch_id: str) -> None:
    """Say that every run still open took the new path of `patch_id`: the marker is still
    recorded, and histories that lack it replay without error."""
    current_runtime().patched(patch_id, deprecated=True)


def continue_as_new(*positional: Any, args: Sequence[Any] = (), workflow: Any = None,
                    workflow_type: str | None = None, task_queue: str | None = None,
                    run_timeout: timedelta | None = None, task_timeout: timedelta | None = None) -> NoReturn:
    """End this run and start a new one of the same workflow id with the arguments as its
    input: given positionally, or as `args` (Temporal's form).

    The workflow type (`workflow`: a run method, class or name, as Temporal's; or
    `workflow_type`) and task queue default to this run's; unset timeouts are inherited
    by the engine. Raises, so nothing after it runs.
    """
    current_runtime()  # fail clearly when called outside workflow code
    if positional and args:
        raise TypeError("pass the arguments positionally or as `args`, not both")
    if workflow is not None:
        workflow_type = workflow_type_of(workflow)
    raise ContinueAsNewError(tuple(positional or args), workflow_type=workflow_type, task_queue=task_queue,
                             run_timeout_ms=_ms(run_timeout), task_timeout_ms=_ms(task_timeout))


def _ms(value: timedelta | None) -> int:
    return 0 if value is None else ceil_ms(value)


def set_signal_handler(name: str, handler: Callable[..., Any] | None) -> None:
    """Handle the signal `name` with `handler` from now on (None: stop handling it).
    Signals of that name that arrived with no handler are given to it at once, in order."""
    current_runtime().handlers.set_signal_handler(name, handler)


def set_dynamic_signal_handler(handler: Callable[..., Any] | None) -> None:
    """Handle every signal no named handler takes, as ``handler(name, args)``."""
    current_runtime().handlers.set_dynamic_signal_handler(handler)


def set_query_handler(name: str, handler: Callable[..., Any] | None) -> None:
    """Answer the query `name` with `handler` (a plain function) from now on (None: stop)."""
    current_runtime().handlers.set_query_handler(name, handler)


def set_dynamic_query_handler(handler: Callable[..., Any] | None) -> None:
    """Answer every query no named handler takes, as ``handler(name, args)``."""
    current_runtime().handlers.set_dynamic_query_handler(handler)


def all_handlers_finished() -> bool:
    """Whether every signal handler that started has returned: wait for it
    (``await workflow.wait_condition(workflow.all_handlers_finished)``) before the run
    returns, so no handler is cut off half way."""
    return not current_runtime().handlers.running
