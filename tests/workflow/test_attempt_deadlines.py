"""The watch that times out local activity attempts of plain functions: it wakes the
runner's loop only for a deadline earlier than the one it waits for, and decides each
attempt once (its function's end or its deadline, whichever comes first)."""

from __future__ import annotations

import asyncio
import threading

from streamproc.workflow.attempt_deadlines import AttemptDeadlines, WatchedAttempt


def _loop() -> asyncio.AbstractEventLoop:
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    return loop


def test_a_stream_of_attempts_with_one_timeout_wakes_the_loop_once_and_only_the_unfinished_time_out():
    loop, deadlines = _loop(), AttemptDeadlines()
    wakes, timed_out, all_due = [], [], threading.Event()
    real = loop.call_soon_threadsafe
    loop.call_soon_threadsafe = lambda *a, **k: (wakes.append(1), real(*a, **k))[1]
    try:
        attempts = []
        for n in range(50):
            attempt = WatchedAttempt(lambda n=n: (timed_out.append(n), len(timed_out) == 25 and all_due.set()))
            deadlines.watch(loop, attempt, 0.2)
            attempts.append(attempt)
        finished = [deadlines.finish(a) for a in attempts[::2]]  # the even ones end in time
        assert all(finished)
        assert all_due.wait(5)
        assert timed_out == list(range(1, 50, 2)) and len(wakes) == 1
        assert not any(deadlines.finish(a) for a in attempts[1::2])  # decided by their deadline
    finally:
        real(loop.stop)


def test_an_earlier_deadline_wakes_the_loop_and_the_later_one_still_fires():
    loop, deadlines = _loop(), AttemptDeadlines()
    order, done = [], threading.Event()
    try:
        deadlines.watch(loop, WatchedAttempt(lambda: (order.append("late"), done.set())), 0.3)
        deadlines.watch(loop, WatchedAttempt(lambda: order.append("early")), 0.05)
        assert done.wait(5)
        assert order == ["early", "late"]
    finally:
        loop.call_soon_threadsafe(loop.stop)
