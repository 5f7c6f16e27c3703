"""The deterministic event loop workflow code runs on.

It runs ready callbacks in the order they were scheduled until none is left, and that is
all: no clock, no threads, no I/O. Futures, tasks, ``asyncio.gather`` and
``asyncio.wait`` work because they only need ``call_soon``; everything that would make
a run depend on the machine it replays on (real-time sleeps, executors, sockets) raises
:class:`~streamproc.workflow.errors.NondeterministicCallError` instead.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
from collections.abc import Callable, Coroutine
from typing import Any

from streamproc.workflow.errors import NondeterministicCallError

__all__ = ["WorkflowEventLoop"]

_WALL_CLOCK_HINT = ("workflow code must not wait on real time: use workflow.sleep() "
                    "or workflow.wait_condition(..., timeout=)")


class WorkflowEventLoop(asyncio.AbstractEventLoop):
    """One loop per workflow run; `owner` is what the ``workflow.*`` functions talk to.

    `now_seconds` gives `time()` the workflow's own time, so code reading ``loop.time()``
    sees the same value on every replay.
    """

    def __init__(self, owner: Any, now_seconds: Callable[[], float]) -> None:
        self.owner = owner
        self._now_seconds = now_seconds
        self._ready: collections.deque[asyncio.Handle] = collections.deque()
        self._running = False
        self._closed = False
        #: Errors raised by callbacks of the runtime itself (not by workflow tasks, whose
        #: exceptions stay in their task): a bug, re-raised by `run_until_idle`.
        self._callback_errors: list[BaseException] = []

    # -- driving ------------------------------------------------------------------------
    def run_until_idle(self, on_idle: Callable[[], bool] = lambda: False) -> None:
        """Run ready callbacks until none is left and `on_idle` wakes nothing more.

        `on_idle` is where wait_condition predicates are checked: it returns True when it
        resolved a future (and so made callbacks ready).
        """
        previous = asyncio.events._get_running_loop()
        asyncio.events._set_running_loop(self)
        self._running = True
        try:
            while True:
                while self._ready:
                    handle = self._ready.popleft()
                    if not handle._cancelled:
                        handle._run()
                    if self._callback_errors:
                        raise self._callback_errors.pop(0)
                if not on_idle():
                    return
        finally:
            self._running = False
            asyncio.events._set_running_loop(previous)

    # -- what asyncio's futures and tasks need ------------------------------------------
    def call_soon(self, callback: Callable[..., Any], *args: Any,
                  context: contextvars.Context | None = None) -> asyncio.Handle:
        handle = asyncio.Handle(callback, args, self, context)
        self._ready.append(handle)
        return handle

    def create_future(self) -> asyncio.Future[Any]:
        return asyncio.Future(loop=self)

    def create_task(self, coro: Coroutine[Any, Any, Any], *, name: str | None = None,
                    context: contextvars.Context | None = None) -> asyncio.Task[Any]:
        return asyncio.Task(coro, loop=self, name=name, context=context)

    def time(self) -> float:
        return self._now_seconds()

    def get_debug(self) -> bool:
        return False

    def is_running(self) -> bool:
        return self._running

    def is_closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        self._closed = True
        self._ready.clear()

    def call_exception_handler(self, context: dict[str, Any]) -> None:
        # Tasks of an evicted run are dropped while pending, and a background task's
        # unretrieved exception already failed nothing: neither is worth a log line. A
        # callback that raised outside any task is a runtime bug and must surface.
        exception = context.get("exception")
        if exception is not None and "handle" in context and "task" not in context \
                and "future" not in context:
            self._callback_errors.append(exception)

    def default_exception_handler(self, context: dict[str, Any]) -> None:
        self.call_exception_handler(context)

    # -- what would make a run depend on the machine it runs on -------------------------
    def call_later(self, delay: float, callback: Callable[..., Any], *args: Any,
                   context: contextvars.Context | None = None) -> asyncio.TimerHandle:
        raise NondeterministicCallError(_WALL_CLOCK_HINT)

    def call_at(self, when: float, callback: Callable[..., Any], *args: Any,
                context: contextvars.Context | None = None) -> asyncio.TimerHandle:
        raise NondeterministicCallError(_WALL_CLOCK_HINT)

    def call_soon_threadsafe(self, callback: Callable[..., Any], *args: Any,
                             context: contextvars.Context | None = None) -> asyncio.Handle:
        raise NondeterministicCallError("workflow code must not use threads: "
                                        "do the work in an activity")

    def run_in_executor(self, executor: Any, func: Callable[..., Any], *args: Any) -> Any:
        raise NondeterministicCallError("workflow code must not run blocking functions in "
                                        "an executor: do the work in an activity")

    def run_forever(self) -> None:
        raise NondeterministicCallError("the workflow runtime drives this loop; "
                                        "workflow code must not run it")

    def run_until_complete(self, future: Any) -> Any:
        self.run_forever()

    def stop(self) -> None:
        raise NondeterministicCallError("workflow code must not stop its event loop")

    async def shutdown_asyncgens(self) -> None:
        return None

    async def shutdown_default_executor(self) -> None:
        return None
