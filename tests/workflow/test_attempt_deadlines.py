"""The watch that times out local activity attempts of plain functions: it wakes the
runner's loop only for a deadline earlier than the one it waits for, and decides each
attempt once (its function's end or its deadline, whichever comes first)."""

from __future__ import annotations

import asyncio
import threading

from streamproc.semantics.retry import RetryPolicy
from streamproc.workflow.attempt_deadlines import SWEEP_AT, AttemptDeadlines, WatchedAttempt
from streamproc.workflow.local_activity_runner import LocalActivityRequest, LocalActivityRunner


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


def test_finished_attempts_do_not_wait_out_their_timeouts_in_the_heap():
    # An hour's timeout at a high rate would otherwise keep an hour of finished entries.
    loop, deadlines = _loop(), AttemptDeadlines()
    try:
        for _ in range(1000):
            attempt = WatchedAttempt(lambda: None)
            deadlines.watch(loop, attempt, 3600)
            assert deadlines.finish(attempt)
        assert len(deadlines._heap) <= 2 * SWEEP_AT
        late = WatchedAttempt(lambda: None)
        deadlines.watch(loop, late, 3600)
        assert any(entry[2] is late for entry in deadlines._heap)  # what is unfinished stays watched
    finally:
        loop.call_soon_threadsafe(loop.stop)


def test_a_timeout_callback_that_raises_keeps_the_others_from_being_stranded():
    loop, deadlines = _loop(), AttemptDeadlines()
    errors, called, done = [], [], threading.Event()
    loop.set_exception_handler(lambda _, context: errors.append(context.get("exception")))

    def fails() -> None:
        raise RuntimeError("broken callback")

    try:
        deadlines.watch(loop, WatchedAttempt(fails), 0.05)
        deadlines.watch(loop, WatchedAttempt(lambda: (called.append(1), done.set())), 0.05)
        assert done.wait(5)
        assert called == [1] and [str(e) for e in errors] == ["broken callback"]
    finally:
        loop.call_soon_threadsafe(loop.stop)


def test_a_runner_used_again_after_close_still_times_attempts_out():
    release = threading.Event()
    runner = LocalActivityRunner()
    request = LocalActivityRequest(seq="1", activity_id="1", activity_type="slow", fn=lambda: release.wait(10),
                                   args=(), attempt=1, original_schedule_time_ms=None, schedule_to_close_ms=0,
                                   start_to_close_ms=50, retry_policy=RetryPolicy(maximum_attempts=1),
                                   local_retry_threshold_ms=60_000)
    try:
        runner.start(request).result(5)  # times out (its late result is dropped)
        runner.close()
        outcome = runner.start(request).result(5)
        assert outcome["failure"]["timeout_type"] == "START_TO_CLOSE"
        assert outcome["retry_state"] == "MAXIMUM_ATTEMPTS_REACHED"
    finally:
        release.set()
        runner.close()
