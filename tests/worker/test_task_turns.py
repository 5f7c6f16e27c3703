"""`TaskTurns.wait_turn`: a completion that would carry its run's next task's answer waits
in line for the workflow worker's turn while turns go by, and gives up only when they stop
moving (`worker/ride_along.py`)."""

from __future__ import annotations

import threading
import time

from streamproc.worker.task_turns import TaskTurns

#: A bound on waits that end as soon as what they wait for happens.
WAIT_S = 10


def _line_up(turns: TaskTurns, count: int) -> list[threading.Event]:
    """`count` threads in line for a turn each, in order; each leaves its turn when its event is set."""
    leaves = []
    for n in range(count):
        leave = threading.Event()
        leaves.append(leave)

        def take(leave=leave) -> None:
            with turns:
                leave.wait(WAIT_S)
        threading.Thread(target=take, daemon=True).start()
        _until(lambda n=n: turns.waiting == n + 1)
    return leaves


def _until(condition) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, "not within the wait"
        time.sleep(0.005)


def test_a_wait_outlasts_its_patience_while_the_turns_ahead_of_it_go_by():
    turns = TaskTurns()
    got = []
    with turns:
        leaves = _line_up(turns, 8)
        waiter = threading.Thread(target=lambda: got.append(turns.wait_turn(0.5)), daemon=True)
        waiter.start()
        _until(lambda: turns.waiting == 9)
        time.sleep(0.1)
    for leave in leaves:  # 0.9 s in all, each turn 0.1 s
        time.sleep(0.1)
        leave.set()
    waiter.join(WAIT_S)
    assert got == [True]
    turns.leave()
    with turns:  # the line goes on
        pass


def test_a_wait_ends_when_the_turn_does_not_change_hands_and_the_line_goes_on_without_it():
    turns = TaskTurns()
    with turns:
        began = time.monotonic()
        assert turns.wait_turn(0.05) is False
        assert time.monotonic() - began >= 0.05
        (leave,) = _line_up(turns, 1)  # behind the ticket given up
    leave.set()
    with turns:
        pass


def test_a_wait_ends_at_its_deadline_even_while_the_turns_ahead_go_by():
    """However the line moves, a wait with a deadline (an activity attempt's) ends by it."""
    turns = TaskTurns()
    got = []
    with turns:
        leaves = _line_up(turns, 8)
        began = time.monotonic()
        waiter = threading.Thread(target=lambda: got.append(turns.wait_turn(0.5, began + 0.35)), daemon=True)
        waiter.start()
        _until(lambda: turns.waiting == 9)
    for leave in leaves:  # a turn every 0.1 s: the patience alone would wait them all out
        time.sleep(0.1)
        leave.set()
        if got:
            break
    waiter.join(WAIT_S)
    assert got == [False] and time.monotonic() - began < 0.8
    for leave in leaves:
        leave.set()
    with turns:  # the line goes on without the ticket given up
        pass


def test_a_turn_wakes_only_the_thread_whose_turn_it_is(monkeypatch):
    """With a hundred completions in line, waking every one at each turn (to find it is not
    theirs) cost as much as the turns: each thread waits once, woken when its turn comes."""
    turns = TaskTurns()
    waits = []
    real_wait = TaskTurns._wait
    monkeypatch.setattr(TaskTurns, "_wait", lambda self, ticket, timeout=None: (
        waits.append(ticket), real_wait(self, ticket, timeout))[1])
    with turns:
        leaves = _line_up(turns, 10)
    for leave in leaves:
        leave.set()
    _until(lambda: turns.waiting == 0)
    with turns:  # every turn was taken and left
        pass
    assert sorted(waits) == list(range(1, 11))
