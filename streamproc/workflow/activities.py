"""Activities from workflow code: `workflow.execute_activity` and `workflow.start_activity`.

Scheduling issues a SCHEDULE_ACTIVITY_TASK command; the activity's close event, when
history delivers it, completes the handle with the result or an ActivityError. Options
are checked here with the engine's own rules, so a bad timeout fails the workflow task
at once with the message the engine would have answered with.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from streamproc.activity.definition import ActivityDefinition
from streamproc.call_arguments import timeout_option
from streamproc.protocol.wire_values import ceil_ms, retry_policy_record
from streamproc.type_hints import call_types
from streamproc.semantics import (
    ActivityTimeouts,
    RetryPolicy,
    normalize_activity_retry_policy,
    normalize_activity_timeouts,
)
from streamproc.workflow.runtime import OpenActivity, WorkflowRuntime, current_runtime

__all__ = ["ActivityCancellationType", "ActivityHandle", "start_activity", "execute_activity",
           "start_activity_method", "execute_activity_method"]

_NO_ARG = object()


class ActivityCancellationType(enum.Enum):
    """What cancelling an awaited activity waits for, as Temporal's.

    TRY_CANCEL asks the engine to cancel it and raises CancelledError at once;
    WAIT_CANCELLATION_COMPLETED asks and waits for the activity's close event (an
    ActivityError caused by a CancelledError, or its result if it finished first);
    ABANDON raises at once without telling the engine.
    """

    TRY_CANCEL = "TRY_CANCEL"
    WAIT_CANCELLATION_COMPLETED = "WAIT_CANCELLATION_COMPLETED"
    ABANDON = "ABANDON"


class ActivityHandle(asyncio.Task):  # type: ignore[type-arg]
    """A scheduled activity: await it for the result, `cancel()` it to ask the engine to
    stop it. Being a task, it works with ``asyncio.gather`` and ``asyncio.wait``."""

    def __init__(self, runtime: WorkflowRuntime, activity: OpenActivity,
                 cancellation_type: ActivityCancellationType) -> None:
        self.activity_id = activity.activity_id
        self.activity_type = activity.activity_type
        self._runtime = runtime
        self._activity = activity
        self._cancellation_type = cancellation_type
        super().__init__(_await_activity(activity, cancellation_type), loop=runtime.loop,
                         name=f"activity {activity.activity_id} ({activity.activity_type})")

    def cancel(self, msg: Any = None) -> bool:
        # Also called by asyncio when a task awaiting this handle (the run itself, or a
        # gather) is cancelled. The request is issued here, not in the coroutine, so that
        # a handle cancelled before it first ran still reaches the engine (or, scheduled
        # in this very task, is dropped before the engine hears of it).
        if not self.done() and self._cancellation_type is not ActivityCancellationType.ABANDON:
            self._runtime.request_cancel_activity(self._activity)
        return super().cancel(msg)


async def _await_activity(activity: OpenActivity, cancellation_type: ActivityCancellationType) -> Any:
    while True:
        try:
            # Shielded: cancelling the handle must not cancel the result itself, which
            # only the activity's close event settles.
            return await asyncio.shield(activity.future)
        except asyncio.CancelledError:
            waits = cancellation_type is ActivityCancellationType.WAIT_CANCELLATION_COMPLETED
            if not waits or activity.future.cancelled():
                raise
            # Waiting for the close event: the ActivityError it brings, or the result.


def start_activity(
    activity: str | Callable[..., Any], arg: Any = _NO_ARG, *, args: Sequence[Any] = (),
    task_queue: str | None = None,
    schedule_to_close_timeout: timedelta | None = None,
    schedule_to_start_timeout: timedelta | None = None,
    start_to_close_timeout: timedelta | None = None,
    heartbeat_timeout: timedelta | None = None,
    retry_policy: RetryPolicy | None = None,
    cancellation_type: ActivityCancellationType = ActivityCancellationType.TRY_CANCEL,
    activity_id: str | None = None,
    result_type: Any = None,
) -> ActivityHandle:
    """Schedule `activity` (a name or an ``@activity.defn`` function) and return its handle.

    Pass one argument as `arg` or several as `args`. The task queue defaults to the
    workflow's. At least one of start_to_close_timeout and schedule_to_close_timeout is
    required. The activity id defaults to the run's next sequence number. The result is
    decoded as `result_type`, by default the function's return annotation (plain JSON
    for a name or an unannotated function).
    """
    runtime = current_runtime()
    activity_type = activity if isinstance(activity, str) else ActivityDefinition.of(activity).name
    if result_type is None and not isinstance(activity, str):
        result_type = call_types(activity).result
    if arg is not _NO_ARG:
        if args:
            raise TypeError("pass one argument as `arg` or several as `args`, not both")
        args = (arg,)
    requested = ActivityTimeouts(*(timeout_option(value, name) for value, name in (
        (schedule_to_close_timeout, "schedule_to_close_timeout"),
        (schedule_to_start_timeout, "schedule_to_start_timeout"),
        (start_to_close_timeout, "start_to_close_timeout"),
        (heartbeat_timeout, "heartbeat_timeout"))))
    normalize_activity_timeouts(requested, run_timeout=runtime.info.run_timeout or timedelta(0),
                                activity_id=activity_id or runtime.peek_id(), activity_type=activity_type)
    if retry_policy is not None:
        normalize_activity_retry_policy(retry_policy)
    command = {
        "activity_type": activity_type, "task_queue": task_queue or runtime.info.task_queue,
        "input": runtime.converter.encode_args(args),
        "schedule_to_close_timeout_ms": ceil_ms(requested.schedule_to_close),
        "schedule_to_start_timeout_ms": ceil_ms(requested.schedule_to_start),
        "start_to_close_timeout_ms": ceil_ms(requested.start_to_close),
        "heartbeat_timeout_ms": ceil_ms(requested.heartbeat),
        "retry_policy": None if retry_policy is None else retry_policy_record(retry_policy),
    }
    return ActivityHandle(runtime, runtime.schedule_activity(command, activity_id, result_type), cancellation_type)


async def execute_activity(activity: str | Callable[..., Any], arg: Any = _NO_ARG, **options: Any) -> Any:
    """Schedule `activity` and wait for its result; raises ActivityError if it failed,
    timed out or was cancelled. Takes the options of `start_activity`."""
    return await start_activity(activity, arg, **options)


#: Temporal's names for an activity that is a method (``MyActivities.charge``): the same calls.
start_activity_method = start_activity
execute_activity_method = execute_activity

