"""`ActivityEnvironment`: run an activity function outside a worker, with a fake attempt
around it, as Temporal's ``temporalio.testing.ActivityEnvironment``::

    env = ActivityEnvironment()
    heartbeats = []
    env.on_heartbeat = lambda *details: heartbeats.append(details)
    assert env.run(charge, "order-1") == "charged"       # a sync activity
    assert await env.run(fetch, "order-1") == "fetched"  # an async one

Inside, ``activity.info()`` is `info`, ``activity.heartbeat()`` calls `on_heartbeat`,
``activity.logger`` adds the info's details, and `cancel()` cancels the attempt: a sync
activity learns it at its next heartbeat (CancelledError), an async one has its task
cancelled (asyncio.CancelledError), as under a worker.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from streamproc.activity.context import ActivityContext, CancelReason, Info, reset_current, set_current

__all__ = ["ActivityEnvironment"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class ActivityEnvironment:
    """A fake attempt for activity code. `info` is what ``activity.info()`` returns (start
    from `default_info()` and ``dataclasses.replace`` what matters); `on_heartbeat` gets
    each heartbeat's details."""

    def __init__(self) -> None:
        self.info = ActivityEnvironment.default_info()
        self.on_heartbeat: Callable[..., None] = lambda *details: None
        self._lock = threading.Lock()
        self._running: set[ActivityContext] = set()
        self._cancelled = False

    @staticmethod
    def default_info() -> Info:
        """Temporal's defaults: activity ``test`` of type ``unknown``, first attempt, one
        second to run, times at the epoch."""
        return Info(activity_id="test", activity_type="unknown", task_queue="test", attempt=1,
                    heartbeat_details=(), scheduled_time=_EPOCH, current_attempt_scheduled_time=_EPOCH,
                    started_time=_EPOCH, schedule_to_close_timeout=timedelta(seconds=1),
                    start_to_close_timeout=timedelta(seconds=1), heartbeat_timeout=None,
                    namespace="default", workflow_id="test", workflow_run_id="test-run",
                    workflow_type="test", workflow_namespace="default", task_token=b"test")

    def cancel(self) -> None:
        """Request cancellation of the running attempts (and of those run later); only the
        first call counts."""
        with self._lock:
            if self._cancelled:
                return
            self._cancelled = True
            running = list(self._running)
        for ctx in running:
            ctx.cancel(CancelReason.CANCEL_REQUESTED)

    def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call `fn` in the fake attempt: its result for a plain function, an awaitable of
        it for a coroutine function."""
        ctx = ActivityContext(self.info, lambda details: self.on_heartbeat(*details),
                              is_async=inspect.iscoroutinefunction(fn))
        if ctx.is_async:
            return self._run_async(ctx, fn, args, kwargs)
        self._begin(ctx)
        token = set_current(ctx)
        try:
            return fn(*args, **kwargs)
        finally:
            reset_current(token)
            self._end(ctx)

    async def _run_async(self, ctx: ActivityContext, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        async def attempt() -> Any:
            set_current(ctx)  # in the attempt's own task context only
            return await fn(*args, **kwargs)

        loop = asyncio.get_running_loop()
        task = loop.create_task(attempt())
        ctx.on_cancel(lambda: loop.call_soon_threadsafe(task.cancel))
        self._begin(ctx)
        try:
            return await task
        finally:
            self._end(ctx)

    def _begin(self, ctx: ActivityContext) -> None:
        with self._lock:
            self._running.add(ctx)
            cancelled = self._cancelled
        if cancelled:
            ctx.cancel(CancelReason.CANCEL_REQUESTED)

    def _end(self, ctx: ActivityContext) -> None:
        with self._lock:
            self._running.discard(ctx)
