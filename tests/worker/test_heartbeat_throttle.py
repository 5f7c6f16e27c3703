"""Heartbeat throttling as Temporal's SDKs do it: the first at once, then at most one per
0.8 x heartbeat timeout with the latest details, and nothing recorded is lost."""

from __future__ import annotations

import threading
from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st

from streamproc.activity.heartbeats import NOTHING, HeartbeatSender, HeartbeatThrottle, throttle_interval


def test_the_interval_is_four_fifths_of_the_heartbeat_timeout_capped_at_a_minute():
    assert throttle_interval(timedelta(seconds=10)) == timedelta(seconds=8)
    assert throttle_interval(timedelta(minutes=5)) == timedelta(seconds=60)
    assert throttle_interval(None) == timedelta(seconds=30)
    assert throttle_interval(timedelta(0)) == timedelta(seconds=30)


def test_first_heartbeat_goes_at_once_and_the_latest_pending_one_at_the_window_end():
    t = HeartbeatThrottle(timedelta(seconds=8))
    assert t.record("a", now=0.0) == "a"
    assert t.record("b", now=1.0) is NOTHING
    assert t.record("c", now=2.0) is NOTHING  # replaces "b"
    assert t.next_due == 8.0
    assert t.due(now=7.9) is NOTHING
    assert t.due(now=8.0) == "c"
    assert t.next_due is None and t.due(now=100.0) is NOTHING
    # "c" opened a new window at 8: a heartbeat inside it waits, one after it goes at once
    assert t.record("d", now=15.0) is NOTHING and t.next_due == 16.0
    assert t.due(now=16.0) == "d"
    assert t.record("e", now=30.0) == "e"


def test_details_pending_when_the_attempt_ends_are_handed_over_once():
    t = HeartbeatThrottle(timedelta(seconds=8))
    t.record("a", now=0.0)
    t.record(None, now=1.0)  # None is details too, not "nothing"
    assert t.take_pending() is None
    assert t.take_pending() is NOTHING and t.next_due is None


@given(st.lists(st.tuples(st.floats(0, 5), st.integers()), min_size=1, max_size=60))
def test_sends_are_spaced_by_the_interval_and_the_last_details_always_go_out(steps):
    interval = 1.0
    t = HeartbeatThrottle(timedelta(seconds=interval))
    now, sent = 0.0, []
    for gap, details in steps:
        # a timer would fire at next_due: deliver whatever falls due during the gap
        while t.next_due is not None and t.next_due <= now + gap:
            at = t.next_due
            sent.append((at, t.due(at)))
        now += gap
        out = t.record(details, now)
        if out is not NOTHING:
            sent.append((now, out))
    last = t.take_pending()
    final = last if last is not NOTHING else sent[-1][1]
    assert final == steps[-1][1]
    times = [at for at, _ in sent]
    assert all(b - a >= interval - 1e-9 for a, b in zip(times, times[1:]))
    assert sent[0] == (steps[0][0], steps[0][1])


def test_the_sender_delivers_pending_details_from_a_timer_and_nothing_after_close():
    now = [0.0]  # the throttle's clock; the timer thread keeps checking it
    sent, delivered = [], threading.Event()

    def send(details):
        sent.append(details)
        delivered.set()

    sender = HeartbeatSender(timedelta(milliseconds=20), send, clock=lambda: now[0])
    sender.record(1)
    delivered.clear()
    sender.record(2)
    sender.record(3)
    assert sent == [1]  # and stays so: the window has not ended on the throttle's clock
    now[0] = 0.02
    assert delivered.wait(10)  # the timer sent the latest details
    assert sent == [1, 3]
    sender.record(4)
    assert sender.close() == 4  # pending: the caller sends it before the answer
    sender.record(5)  # after close: dropped, and no timer is left to send it
    assert sent == [1, 3]
