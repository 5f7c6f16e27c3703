"""Runs local activities for a workflow worker: every attempt, and the short backoffs between.

A local activity's function runs in the workflow worker's process, outside the workflow's
deterministic loop: a coroutine function on the runner's own event loop (one background
thread), a plain function in its thread pool. One `start` covers the attempts that fit
in the worker: a failed attempt whose backoff is at most the local retry threshold is
retried here after that backoff; a longer one ends the run with the failure and the
backoff, and the workflow waits it out under a durable timer. Every attempt is bounded
by start-to-close and by what is left of schedule-to-close, measured from the first
schedule. What comes back is the marker's details (`local_activity_markers`).

Time is injected (`clock`, `sleep`) so that tests jump over backoffs with a manual clock.
A timed-out plain function cannot be stopped: its thread runs on and its result is
dropped, as in Temporal's Python SDK.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import threading
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from streamproc.activity.context import ActivityContext, Info, reset_current, run_in_context, set_current
from streamproc.activity.failures import attempt_failure
from streamproc.clock import Clock, SystemClock
from streamproc.converter import DataConverter
from streamproc.protocol.failures import failure_from_record, failure_to_record
from streamproc.semantics import RetryPolicy, TimeoutType
from streamproc.semantics.activity_timeouts import NOT_ENOUGH_TIME_MESSAGE
from streamproc.semantics.enums import RetryState
from streamproc.semantics.failures import TimeoutFailure
from streamproc.semantics.local_activity_retry import plan_local_retry
from streamproc.workflow.attempt_deadlines import AttemptDeadlines, WatchedAttempt

__all__ = ["LocalActivityRequest", "LocalActivityRunner", "default_runner"]


@dataclasses.dataclass(frozen=True)
class LocalActivityRequest:
    """One call of a local activity from workflow code, from its `attempt` on."""

    seq: str
    activity_id: str
    activity_type: str
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    attempt: int
    #: When the first attempt was started (the runner's clock; None: this call's first
    #: attempt, now): schedule-to-close counts from it. A retry after a durable timer
    #: carries it over from the marker of the attempt before.
    original_schedule_time_ms: int | None
    schedule_to_close_ms: int  # 0: none
    start_to_close_ms: int  # 0: none (schedule-to-close bounds each attempt)
    retry_policy: RetryPolicy  # filled with the defaults
    local_retry_threshold_ms: int
    task_queue: str = ""


def _time(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


class LocalActivityRunner:
    def __init__(self, *, clock: Clock | None = None,
                 sleep: Callable[[float], Awaitable[None]] | None = None, max_threads: int = 16,
                 data_converter: DataConverter | None = None) -> None:
        self.clock = clock or SystemClock()
        self._sleep = sleep or asyncio.sleep
        self.converter = data_converter or DataConverter.default()
        self._max_threads = max_threads
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        #: Timeouts of the attempts that run a plain function on the pool (`_start_plain`).
        self._deadlines = AttemptDeadlines()

    def start(self, request: LocalActivityRequest) -> concurrent.futures.Future[dict[str, Any]]:
        """Run `request`'s attempts in the background; the future holds the marker's details."""
        loop, pool = self._running_loop()
        if not asyncio.iscoroutinefunction(request.fn):
            started = self._start_plain(request, loop, pool)
            if started is not None:
                return started
        return asyncio.run_coroutine_threadsafe(self._attempts(request), loop)

    def _start_plain(self, r: LocalActivityRequest, loop: asyncio.AbstractEventLoop,
                     pool: concurrent.futures.ThreadPoolExecutor) -> concurrent.futures.Future[dict[str, Any]] | None:
        """The first attempt of a plain function, handed to the pool from this thread. A
        success settles the future on the pool's thread; a failure (retries, backoffs) or the
        attempt's timeout (`attempt_deadlines`) carries on in `_attempts` on the loop, as if
        that attempt had run there. None when no time is left for it (`_attempts` says so)."""
        first_ms, expiration_ms = self._window(r)
        started_ms = self.clock.now_ms()
        timeout_ms, timeout_type = _attempt_timeout(r, started_ms, expiration_ms)
        if timeout_type is TimeoutType.SCHEDULE_TO_CLOSE and timeout_ms <= 0:
            return None
        out: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
        ctx = _context(r, r.attempt, first_ms, started_ms, is_async=False)
        pool_future: concurrent.futures.Future[None] | None = None

        def carry_on(outcome: tuple[str | None, dict[str, Any] | None]) -> None:  # on the loop
            if out.cancelled():
                return  # the code stopped waiting for it (an abandoned call): no more attempts
            _settle_with(out, loop.create_task(self._attempts(r, (r.attempt, first_ms, outcome))), loop)

        def timed_out() -> None:
            if pool_future is not None:
                pool_future.cancel()  # not started yet (a full pool): it never runs
            carry_on((None, _timed_out(timeout_type)))

        def run() -> None:
            try:
                try:
                    outcome = self.converter.encode(run_in_context(ctx, r.fn, r.args)), None
                except Exception as exc:  # the attempt's failure, as a remote activity reports it
                    outcome = None, attempt_failure(exc, self.converter)
            except BaseException as exc:  # not the function's failure (its failure record's, an exit):
                if self._deadlines.finish(watched):  # the task fails on it, as on the loop's path
                    _fail(out, exc)
                return
            if not self._deadlines.finish(watched):
                return  # timed out meanwhile: its result is dropped
            if outcome[1] is not None:
                loop.call_soon_threadsafe(carry_on, outcome)
            else:
                _resolve(out, {**_details(r, first_ms), "attempt": r.attempt, "result": outcome[0]})

        watched = WatchedAttempt(timed_out)
        try:
            pool_future = pool.submit(run)
        except RuntimeError:  # closing: as the loop's path would, it never runs
            return None
        out.add_done_callback(lambda f: pool_future.cancel() if f.cancelled() else None)
        if timeout_ms:
            self._deadlines.watch(loop, watched, timeout_ms / 1000)
        return out

    def close(self) -> None:
        with self._lock:
            loop, self._loop = self._loop, None
            pool, self._pool = self._pool, None
            self._deadlines = AttemptDeadlines()  # its timer was on the stopped loop
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def _window(self, r: LocalActivityRequest) -> tuple[int, int | None]:
        """(when the call's first attempt was scheduled, when schedule-to-close ends it: None if unbounded)."""
        first_ms = self.clock.now_ms() if r.original_schedule_time_ms is None else r.original_schedule_time_ms
        return first_ms, _expiration_ms(r, first_ms)

    def _running_loop(self) -> tuple[asyncio.AbstractEventLoop, concurrent.futures.ThreadPoolExecutor]:
        """The loop and pool of the attempts, both taken under the lock (a `close` may come between)."""
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._pool = concurrent.futures.ThreadPoolExecutor(self._max_threads,
                                                                   thread_name_prefix="local-activity")
                threading.Thread(target=self._loop.run_forever, name="local-activities", daemon=True).start()
            return self._loop, self._pool

    async def _attempts(self, r: LocalActivityRequest,
                        first: tuple[int, int, tuple[str | None, dict[str, Any] | None]] | None = None
                        ) -> dict[str, Any]:
        """`first`: (its attempt, first_ms, outcome) of an attempt already run elsewhere."""
        if first is None:
            (first_ms, expiration_ms), attempt, outcome = self._window(r), r.attempt, None
        else:
            attempt, first_ms, outcome = first
            expiration_ms = _expiration_ms(r, first_ms)
        details = _details(r, first_ms)
        while True:
            result, failure = outcome or await self._attempt(r, attempt, first_ms, expiration_ms)
            outcome = None
            if failure is None:
                return {**details, "attempt": attempt, "result": result}
            plan = plan_local_retry(r.retry_policy, attempt=attempt, failure=failure_from_record(failure),
                                    now=_time(self.clock.now_ms()),
                                    expiration=_time(expiration_ms) if expiration_ms else None,
                                    local_retry_threshold=timedelta(milliseconds=r.local_retry_threshold_ms))
            if not plan.retries:
                if plan.retry_state is RetryState.TIMEOUT and failure.get("kind") != "TIMEOUT":
                    # No time left for another attempt: the caller sees schedule-to-close, caused by the last failure.
                    failure = {**failure_to_record(TimeoutFailure(
                        message=NOT_ENOUGH_TIME_MESSAGE, timeout_type=TimeoutType.SCHEDULE_TO_CLOSE)), "cause": failure}
                return {**details, "attempt": attempt, "failure": failure, "retry_state": plan.retry_state.name}
            delay_ms = -(-plan.delay // timedelta(milliseconds=1))
            if not plan.in_worker:
                return {**details, "attempt": attempt, "failure": failure, "backoff_ms": delay_ms,
                        "retry_state": plan.retry_state.name}
            await self._sleep(delay_ms / 1000)
            attempt += 1

    async def _attempt(self, r: LocalActivityRequest, attempt: int, first_ms: int,
                       expiration_ms: int | None) -> tuple[str | None, dict[str, Any] | None]:
        """One attempt: (the encoded result, None) or (None, its FailureRecord). It is
        bounded by start-to-close, or by what is left of schedule-to-close if that is less."""
        started_ms = self.clock.now_ms()
        timeout_ms, timeout_type = _attempt_timeout(r, started_ms, expiration_ms)
        if timeout_type is TimeoutType.SCHEDULE_TO_CLOSE and timeout_ms <= 0:
            return None, _timed_out(timeout_type)  # a timer's backoff ran past schedule-to-close: no time for this one
        call = asyncio.ensure_future(self._call(r, attempt, first_ms, started_ms))
        # asyncio.wait, not wait_for: a TimeoutError the function raises itself is its own failure.
        done, _ = await asyncio.wait({call}, timeout=timeout_ms / 1000 if timeout_ms else None)
        if not done:
            call.cancel()
            return None, _timed_out(timeout_type)
        try:
            return self.converter.encode(call.result()), None
        except Exception as exc:  # the attempt's failure, as a remote activity reports it
            return None, attempt_failure(exc, self.converter)

    async def _call(self, r: LocalActivityRequest, attempt: int, first_ms: int, started_ms: int) -> Any:
        ctx = _context(r, attempt, first_ms, started_ms, is_async=asyncio.iscoroutinefunction(r.fn))
        if ctx.is_async:
            token = set_current(ctx)
            try:
                return await r.fn(*r.args)
            finally:
                reset_current(token)
        return await asyncio.get_running_loop().run_in_executor(self._pool, run_in_context, ctx, r.fn, r.args)


def _expiration_ms(r: LocalActivityRequest, first_ms: int) -> int | None:
    return first_ms + r.schedule_to_close_ms if r.schedule_to_close_ms else None


def _details(r: LocalActivityRequest, first_ms: int) -> dict[str, Any]:
    """What every outcome's marker details start with."""
    return {"seq": r.seq, "activity_id": r.activity_id, "activity_type": r.activity_type,
            "original_schedule_time_ms": first_ms}


def _attempt_timeout(r: LocalActivityRequest, started_ms: int, expiration_ms: int | None) -> tuple[int, TimeoutType]:
    """An attempt's bound (ms; 0: none): start-to-close, or what is left of schedule-to-close if that is less."""
    timeout_ms, timeout_type = r.start_to_close_ms, TimeoutType.START_TO_CLOSE
    if expiration_ms is not None and (not timeout_ms or expiration_ms - started_ms < timeout_ms):
        timeout_ms, timeout_type = expiration_ms - started_ms, TimeoutType.SCHEDULE_TO_CLOSE
    return timeout_ms, timeout_type


def _context(r: LocalActivityRequest, attempt: int, first_ms: int, started_ms: int, is_async: bool) -> ActivityContext:
    info = Info(activity_id=r.activity_id, activity_type=r.activity_type, task_queue=r.task_queue,
                attempt=attempt, heartbeat_details=(), scheduled_time=_time(first_ms),
                current_attempt_scheduled_time=_time(started_ms), started_time=_time(started_ms),
                schedule_to_close_timeout=_timeout(r.schedule_to_close_ms),
                start_to_close_timeout=_timeout(r.start_to_close_ms), heartbeat_timeout=None, is_local=True)
    # A local activity has no heartbeats to send: the workflow task is what is kept alive.
    return ActivityContext(info, lambda details: None, is_async=is_async)


def _fail(out: concurrent.futures.Future[Any], exc: BaseException) -> None:
    try:
        out.set_exception(exc)
    except concurrent.futures.InvalidStateError:  # cancelled meanwhile: nobody waits for it
        pass


def _resolve(out: concurrent.futures.Future[Any], value: Any) -> None:
    try:
        out.set_result(value)
    except concurrent.futures.InvalidStateError:  # cancelled meanwhile: nobody waits for it
        pass


def _settle_with(out: concurrent.futures.Future[Any], task: asyncio.Task[Any], loop: asyncio.AbstractEventLoop) -> None:
    """`out` gets `task`'s outcome; cancelling `out` cancels `task` (as `run_coroutine_threadsafe`)."""
    def settle(done: asyncio.Task[Any]) -> None:
        if done.cancelled():
            out.cancel()
        elif done.exception() is not None:
            _fail(out, done.exception())
        else:
            _resolve(out, done.result())
    task.add_done_callback(settle)
    out.add_done_callback(lambda f: loop.call_soon_threadsafe(task.cancel) if f.cancelled() else None)


def _timed_out(timeout_type: TimeoutType) -> dict[str, Any]:
    """The FailureRecord of an attempt that ran out of `timeout_type` (made only then)."""
    return failure_to_record(TimeoutFailure(message=f"activity {timeout_type.short_name} timeout",
                                            timeout_type=timeout_type))


def _timeout(ms: int) -> timedelta | None:
    return timedelta(milliseconds=ms) if ms else None


_default: LocalActivityRunner | None = None
_default_lock = threading.Lock()


def default_runner() -> LocalActivityRunner:
    """The process's runner for instances a worker did not give one (tests, replays)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = LocalActivityRunner()
        return _default
