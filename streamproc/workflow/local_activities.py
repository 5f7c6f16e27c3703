"""Local activities from workflow code: `workflow.execute_local_activity` and
`workflow.start_local_activity`, with Temporal's semantics.

A local activity is a function the workflow worker runs itself, inside the workflow
task, instead of scheduling an activity task for an activity worker: no activity events,
no task queue hop, one marker in history (`local_activity_markers`). It is retried in
the worker under its retry policy while the backoff is at most `local_retry_threshold`
(default one minute); a longer backoff becomes a durable timer, after which the next
attempt runs in a later task under the run's next sequence number. `schedule_to_close_
timeout` bounds every attempt from the first schedule. A worker that dies before its
task completes leaves no marker, so the function runs again: at least once, as in
Temporal. The function must be given itself (an ``@activity.defn`` or any callable): the
worker does not look local activities up by name.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from streamproc.activity.definition import ActivityDefinition
from streamproc.call_arguments import NO_ARG, call_arguments, timeout_option
from streamproc.protocol.wire_values import ceil_ms
from streamproc.type_hints import call_types
from streamproc.semantics import (
    ActivityTimeouts,
    RetryPolicy,
    normalize_activity_retry_policy,
    normalize_activity_timeouts,
)
from streamproc.semantics.local_activity_retry import DEFAULT_LOCAL_RETRY_THRESHOLD
from streamproc.workflow.current import current_runtime
from streamproc.workflow.local_activity_markers import local_activity_error
from streamproc.workflow.local_activity_runner import LocalActivityRequest

if TYPE_CHECKING:
    from streamproc.workflow.runtime import WorkflowRuntime

__all__ = ["LocalActivityHandle", "start_local_activity", "execute_local_activity"]


class LocalActivityHandle(asyncio.Task):  # type: ignore[type-arg]
    """A local activity call: await it for the result (ActivityError if it failed).
    Cancelling it stops waiting for it at once and records nothing; a running async
    function is cancelled, a plain one runs on in its thread and its result is dropped."""

    def __init__(self, runtime: WorkflowRuntime, request: LocalActivityRequest, result_type: Any = None) -> None:
        self.activity_id = request.activity_id
        self.activity_type = request.activity_type
        super().__init__(_attempts(runtime, request, result_type), loop=runtime.loop,
                         name=f"local activity {request.activity_id} ({request.activity_type})")


async def _attempts(runtime: WorkflowRuntime, request: LocalActivityRequest, result_type: Any) -> Any:
    while True:
        try:
            details = await runtime.local_activities.schedule(request)
        except asyncio.CancelledError:
            # Waited for no longer: no marker, on first execution and on replay alike.
            runtime.local_activities.abandon(request.seq)
            raise
        if "backoff_ms" in details:
            # Longer than the local retry threshold: wait durably, then the next attempt
            # is a new call (the run's next sequence number) in a later workflow task.
            timer = runtime.start_timer(details["backoff_ms"])
            try:
                await timer.future
            except asyncio.CancelledError:
                runtime.cancel_timer(timer)
                raise
            request = dataclasses.replace(request, seq=runtime.next_id(), attempt=details["attempt"] + 1,
                                          original_schedule_time_ms=details.get("original_schedule_time_ms"))
            continue
        if "failure" in details:
            raise local_activity_error(details, runtime.converter)
        return runtime.converter.decode(details.get("result"), result_type)


def start_local_activity(
    activity: Callable[..., Any], arg: Any = NO_ARG, *, args: Sequence[Any] = (),
    schedule_to_close_timeout: timedelta | None = None,
    start_to_close_timeout: timedelta | None = None,
    retry_policy: RetryPolicy | None = None,
    local_retry_threshold: timedelta | None = None,
    activity_id: str | None = None,
    result_type: Any = None,
) -> LocalActivityHandle:
    """Run `activity` (an ``@activity.defn`` function, sync or async, or any callable) in
    this worker, inside the workflow task, and return its handle.

    One of start_to_close_timeout and schedule_to_close_timeout is required. Without a
    retry policy it retries as an activity does (1 s, 2 s, ... up to 100 s, unlimited
    attempts), so give schedule_to_close_timeout or maximum_attempts to bound it.
    """
    runtime = current_runtime()
    runtime.assert_writable("start local activity")
    if not callable(activity):
        raise TypeError(f"a local activity is a function, got {activity!r}")
    try:
        activity_type = ActivityDefinition.of(activity).name
    except TypeError:
        activity_type = getattr(activity, "__name__", None) or type(activity).__name__
    seq = runtime.next_id()
    timeouts = normalize_activity_timeouts(
        ActivityTimeouts(schedule_to_close=timeout_option(schedule_to_close_timeout, "schedule_to_close_timeout"),
                         start_to_close=timeout_option(start_to_close_timeout, "start_to_close_timeout")),
        run_timeout=runtime.info.run_timeout or timedelta(0), activity_id=activity_id or seq,
        activity_type=activity_type)
    threshold = DEFAULT_LOCAL_RETRY_THRESHOLD if local_retry_threshold is None \
        else timeout_option(local_retry_threshold, "local_retry_threshold")
    request = LocalActivityRequest(
        seq=seq, activity_id=activity_id or seq, activity_type=activity_type, fn=activity,
        args=tuple(call_arguments(arg, args)), attempt=1, original_schedule_time_ms=None,
        schedule_to_close_ms=ceil_ms(timeouts.schedule_to_close),
        start_to_close_ms=ceil_ms(timeouts.start_to_close),
        retry_policy=normalize_activity_retry_policy(retry_policy),
        local_retry_threshold_ms=ceil_ms(threshold), task_queue=runtime.info.task_queue)
    if result_type is None:
        result_type = call_types(activity).result
    return LocalActivityHandle(runtime, request, result_type)


async def execute_local_activity(activity: Callable[..., Any], arg: Any = NO_ARG, **options: Any) -> Any:
    """Run `activity` as a local activity and wait for its result; raises ActivityError
    (cause: the last attempt's ApplicationError or TimeoutError) if it failed. Takes the
    options of `start_local_activity`."""
    return await start_local_activity(activity, arg, **options)
