"""Durable waits: `workflow.sleep` and `workflow.wait_condition`.

A timer is a START_TIMER command; its TimerFired event wakes the code, on first
execution and on every replay alike. A wait that is cancelled (its task, or the whole
run) cancels its timer, so the engine does not fire it for nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta

from streamproc.protocol.wire_values import ceil_ms
from streamproc.workflow.runtime import current_runtime

__all__ = ["sleep", "wait_condition"]


async def sleep(duration: timedelta | float) -> None:
    """Wait `duration` (a timedelta or seconds) of workflow time, durably.

    Zero or less only yields to other coroutines, without a timer.
    """
    duration_ms = _duration_ms(duration, "duration")
    runtime = current_runtime()
    if duration_ms <= 0:
        await asyncio.sleep(0)
        return
    timer = runtime.start_timer(duration_ms)
    try:
        await timer.future
    except asyncio.CancelledError:
        runtime.cancel_timer(timer)
        raise


async def wait_condition(predicate: Callable[[], bool], *,
                         timeout: timedelta | float | None = None) -> None:
    """Wait until `predicate()` is true; it is checked whenever the workflow's coroutines
    have nothing else to do. With `timeout`, raise ``asyncio.TimeoutError`` when it
    elapses first (the timer is cancelled when the condition wins)."""
    runtime = current_runtime()
    timeout_ms = None if timeout is None else _duration_ms(timeout, "timeout")
    if predicate():
        return
    condition = runtime.add_condition(predicate)
    if timeout_ms is None:
        try:
            await condition
        finally:
            runtime.remove_condition(condition)
        return
    timer = runtime.start_timer(max(timeout_ms, 1))
    try:
        await asyncio.wait([condition, timer.future], return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        runtime.cancel_timer(timer)
        raise
    finally:
        runtime.remove_condition(condition)
        if not condition.done():
            condition.cancel()
    if condition.done() and not condition.cancelled():
        runtime.cancel_timer(timer)
        condition.result()  # re-raises what the predicate raised
        return
    raise asyncio.TimeoutError(f"condition not met within {timeout_ms} ms")


def _duration_ms(value: timedelta | float, name: str) -> int:
    if isinstance(value, timedelta):
        return ceil_ms(value)  # a positive duration under a millisecond is still a timer
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return -int(-value * 1000 // 1)
    raise TypeError(f"{name} must be a timedelta or a number of seconds, got {value!r}")
