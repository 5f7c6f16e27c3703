"""What activity code can ask while it runs: `info()`, `heartbeat()`, `is_cancelled()`.

The worker runs each attempt with an :class:`ActivityContext` in a context variable: a
sync activity's thread sets it around the call, an async activity's task sets it in
its own context, so the functions below find the right attempt in either, and nested
helpers need no argument passed down.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, NoReturn

from streamproc.activity import errors
from streamproc.converter import DataConverter
from streamproc.protocol.task_tokens import TaskToken
from streamproc.protocol.wire_values import policy_from_record
from streamproc.semantics.retry import RetryPolicy

__all__ = ["Info", "ActivityContext", "CancelReason", "info_from_task", "in_activity",
           "info", "heartbeat", "is_cancelled", "wait_for_cancelled", "wait_for_cancelled_sync",
           "raise_complete_async"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclasses.dataclass(frozen=True)
class Info:
    """The attempt being run. Timeouts are ``None`` when not set; times are UTC."""

    activity_id: str
    activity_type: str
    task_queue: str
    attempt: int
    #: What the previous attempt last heartbeated: lets a retry resume where it stopped.
    heartbeat_details: Sequence[Any]
    #: When the activity was first scheduled (the first attempt).
    scheduled_time: datetime
    current_attempt_scheduled_time: datetime
    started_time: datetime
    schedule_to_close_timeout: timedelta | None
    start_to_close_timeout: timedelta | None
    heartbeat_timeout: timedelta | None
    #: The worker's namespace (its topics' prefix).
    namespace: str = ""
    #: The policy the engine retries the activity by (None: the engine's default).
    retry_policy: RetryPolicy | None = None
    # Who scheduled it: None for an activity a client scheduled.
    workflow_id: str | None = None
    workflow_run_id: str | None = None
    workflow_type: str | None = None
    workflow_namespace: str | None = None
    #: A local activity, run by the workflow worker inside its workflow task.
    is_local: bool = False
    #: Names this attempt for `client.get_async_activity_handle(task_token=...)` (opaque bytes).
    task_token: bytes = b""

    def logger_details(self) -> dict[str, Any]:
        """What `activity.logger` adds to each line, as Temporal's."""
        return {"activity_id": self.activity_id, "activity_type": self.activity_type, "attempt": self.attempt,
                "namespace": self.namespace, "task_queue": self.task_queue, "workflow_id": self.workflow_id,
                "workflow_run_id": self.workflow_run_id, "workflow_type": self.workflow_type}


def info_from_task(value: dict[str, Any], started_time_ms: int,
                   converter: DataConverter | None = None, namespace: str = "", key: int = -1) -> Info:
    """Info from an ACTIVITY_TASK record (about activity `key`) and the start time the engine
    answered with."""
    decode_details = (converter or DataConverter.default()).decode_details
    return Info(
        activity_id=value["activity_id"], activity_type=value["activity_type"],
        task_queue=value["task_queue"], attempt=value["attempt"],
        heartbeat_details=decode_details(value.get("heartbeat_details")),
        scheduled_time=_time(value["first_scheduled_time_ms"]),
        current_attempt_scheduled_time=_time(value["scheduled_time_ms"]),
        started_time=_time(started_time_ms),
        schedule_to_close_timeout=_timeout(value["schedule_to_close_timeout_ms"]),
        start_to_close_timeout=_timeout(value["start_to_close_timeout_ms"]),
        heartbeat_timeout=_timeout(value["heartbeat_timeout_ms"]),
        namespace=namespace,
        retry_policy=policy_from_record(value["retry_policy"]) if value.get("retry_policy") else None,
        task_token=TaskToken(namespace, key, value["attempt"], value["activity_id"]).encode() if key >= 0 else b"",
        **_scheduled_by(value, namespace),
    )


def _scheduled_by(value: dict[str, Any], namespace: str) -> dict[str, Any]:
    """Info's workflow fields from a task of an activity a workflow scheduled."""
    if not value.get("workflow_id"):
        return {}
    return {"workflow_id": value["workflow_id"], "workflow_run_id": value["run_id"],
            "workflow_type": value["workflow_type"], "workflow_namespace": namespace}


class CancelReason:
    """Why an attempt was cancelled; only the first reason counts."""

    #: The engine answered a heartbeat with cancel_requested: report canceled.
    CANCEL_REQUESTED = "CANCEL_REQUESTED"
    #: The engine refused a heartbeat: the attempt is over (timed out, or the activity closed).
    ATTEMPT_OVER = "ATTEMPT_OVER"
    #: The worker stopped before the attempt finished.
    WORKER_SHUTDOWN = "WORKER_SHUTDOWN"


class ActivityContext:
    """One running attempt, as activity code sees it (the worker implements `send_heartbeat`)."""

    def __init__(self, info: Info, send_heartbeat: Callable[[tuple[Any, ...]], None],
                 is_async: bool = False) -> None:
        self.info = info
        self.is_async = is_async
        self._send_heartbeat = send_heartbeat
        self._cancelled = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []
        self.cancel_reason: str | None = None

    def heartbeat(self, details: tuple[Any, ...]) -> None:
        # Sync code has no await point to be interrupted at: a heartbeat is where it
        # learns of the cancellation (Temporal's sync activities behave the same).
        # Async code is cancelled through its task instead.
        if self._cancelled.is_set() and not self.is_async:
            raise errors.CancelledError(f"activity cancelled: {self.cancel_reason}")
        self._send_heartbeat(details)

    @property
    def is_cancelled(self) -> bool:
        return self._cancelled.is_set()

    def cancel(self, reason: str) -> bool:
        """Mark the attempt cancelled; False if it already was (the first reason stays)."""
        with self._lock:
            if self._cancelled.is_set():
                return False
            self.cancel_reason = reason
            self._cancelled.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()
        return True

    def on_cancel(self, callback: Callable[[], None]) -> None:
        """Call `callback` when cancelled (at once if it already is); from any thread."""
        with self._lock:
            if not self._cancelled.is_set():
                self._callbacks.append(callback)
                return
        callback()

    def wait_sync(self, timeout: float | None) -> bool:
        return self._cancelled.wait(timeout)


_current: contextvars.ContextVar[ActivityContext] = contextvars.ContextVar("streamproc_activity")


def current() -> ActivityContext:
    try:
        return _current.get()
    except LookupError:
        raise RuntimeError("not in an activity: activity.info(), heartbeat() and is_cancelled() "
                           "work only in code an ActivityWorker runs") from None


def set_current(ctx: ActivityContext) -> contextvars.Token:
    return _current.set(ctx)


def reset_current(token: contextvars.Token) -> None:
    _current.reset(token)


def run_in_context(ctx: ActivityContext, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """Call a synchronous activity function with `ctx` as the current attempt, on whichever
    thread runs it (the worker's, a pool's, the user's executor)."""
    token = set_current(ctx)
    try:
        return fn(*args)
    finally:
        reset_current(token)


def in_activity() -> bool:
    """Whether this code runs in an activity (Temporal's ``activity.in_activity``)."""
    return _current.get(None) is not None


def maybe_current() -> ActivityContext | None:
    """The running attempt's context, or None outside an activity."""
    return _current.get(None)


def info() -> Info:
    """The attempt this code runs for."""
    return current().info


def heartbeat(*details: Any) -> None:
    """Tell the engine the attempt is alive, with `details` for a retry to resume from.

    Throttled: calling it often is cheap. In a sync activity it raises
    :class:`CancelledError` once the attempt is cancelled. Details must be JSON-able.
    """
    current().heartbeat(details)


class _CompleteAsyncError(BaseException):
    """Raised by `raise_complete_async` (Temporal's name): not an error, so a BaseException
    that ``except Exception`` in activity code does not swallow."""


def raise_complete_async() -> NoReturn:
    """End the activity function without completing the attempt: something else completes
    it later, with ``client.get_async_activity_handle(task_token=activity.info().task_token)``
    (or by workflow id and activity id). The attempt stays started; its start-to-close and
    heartbeat timeouts still apply, so whoever finishes it heartbeats through the handle
    while it works. Local activities cannot complete asynchronously."""
    if current().info.is_local:
        raise RuntimeError("local activities cannot complete asynchronously: "
                           "use workflow.execute_activity for one that calls raise_complete_async()")
    raise _CompleteAsyncError()


def is_cancelled() -> bool:
    """Whether cancellation was requested, the attempt is over, or the worker stops."""
    return current().is_cancelled


def wait_for_cancelled_sync(timeout: timedelta | float | None = None) -> bool:
    """Block until cancelled (True) or `timeout` passed (False). Cancellation is learnt
    from heartbeat answers, so heartbeat meanwhile (e.g. from another thread)."""
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
    return current().wait_sync(seconds)


async def wait_for_cancelled() -> None:
    """Wait until cancelled (in an async activity)."""
    ctx = current()
    loop = asyncio.get_running_loop()
    event = asyncio.Event()
    ctx.on_cancel(lambda: loop.call_soon_threadsafe(event.set))
    await event.wait()


def _time(ms: int) -> datetime:
    return _EPOCH + timedelta(milliseconds=ms)


def _timeout(ms: int) -> timedelta | None:
    return timedelta(milliseconds=ms) if ms > 0 else None
