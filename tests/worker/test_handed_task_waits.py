"""How the workflow worker's thread for handed-back tasks waits for them, and how it takes
turns with the task queue's thread (no broker: the replies listener is a fake). The
waits are bounded by events, never measured: a wait that returned too early or too late
shows as a thread still blocked, or not, when the test looks."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from streamproc.protocol.records import Record, RecordType
from streamproc.worker import handed_tasks
from streamproc.worker.handed_tasks import HandedTasks
from streamproc.worker.handed_task_thread import HandedTaskThread
from streamproc.worker.task_turns import TaskTurns
from tests.worker.test_eager_activities import Replies

WAIT_S = 10  # generous: how long a test waits for what should happen at once


def workflow_task(key=9):
    return Record(RecordType.EVENT, "WORKFLOW", "WORKFLOW_TASK", {}, key=key)


class Waiter:
    """A thread blocked in `wait_for_tasks`, as the worker's is, recording what it got."""

    def __init__(self, handed: HandedTasks) -> None:
        self.handed = handed
        self.got: list = []
        self.woke = threading.Event()
        self.thread = threading.Thread(target=self._wait, daemon=True)
        self.thread.start()

    def _wait(self) -> None:
        self.got.append(self.handed.wait_for_tasks())
        self.woke.set()


def test_the_wait_has_no_timeout_and_a_handed_back_task_ends_it_at_once():
    replies = Replies()
    handed = HandedTasks(replies)
    request_id, _ = handed.listen()
    waiter = Waiter(handed)
    # Longer than any slice or expect window: still blocked, it did not wake on a clock.
    assert not waiter.woke.wait(handed_tasks.EXPECT_S + 0.5)
    replies.answer(request_id, workflow_task(7))  # on the listener's thread, in the worker
    assert waiter.woke.wait(WAIT_S)
    assert [[r.key for r in got] for got in waiter.got] == [[7]]


def test_a_worker_that_expects_nothing_waits_the_same_way_until_a_late_task_comes():
    """A task handed back after an engine outage (no ask open any more) is still taken."""
    handed = HandedTasks(Replies())
    waiter = Waiter(handed)
    assert not waiter.woke.wait(0.5)
    handed.put(workflow_task(3))
    assert waiter.woke.wait(WAIT_S) and [r.key for r in waiter.got[0]] == [3]


def test_stopping_ends_the_wait_once_the_window_of_the_last_ask_has_passed(monkeypatch):
    monkeypatch.setattr(handed_tasks, "EXPECT_S", 0.3)
    replies = Replies()
    handed = HandedTasks(replies)
    handed.listen()
    waiter = Waiter(handed)
    handed.stop()
    assert waiter.woke.wait(WAIT_S) and waiter.got == [None]

    idle = HandedTasks(Replies())  # never asked: nothing to wait for once stopped
    waiter = Waiter(idle)
    idle.stop()
    assert waiter.woke.wait(WAIT_S) and waiter.got == [None]


def test_a_stopped_worker_still_gets_a_task_that_comes_within_the_window():
    replies = Replies()
    handed = HandedTasks(replies)
    request_id, _ = handed.listen()
    handed.stop()
    waiter = Waiter(handed)
    replies.answer(request_id, workflow_task(5))
    assert waiter.woke.wait(WAIT_S) and [r.key for r in waiter.got[0]] == [5]


def test_tasks_put_before_the_wait_are_taken_without_waiting_and_all_at_once():
    handed = HandedTasks(Replies())
    handed.put(workflow_task(1))
    handed.put(workflow_task(2))
    waiter = Waiter(handed)
    assert waiter.woke.wait(WAIT_S) and [r.key for r in waiter.got[0]] == [1, 2]


def test_turns_are_served_in_the_order_they_were_asked_for():
    """A thread that gives its turn back and asks again at once goes after the one that
    was waiting (a plain lock may give it straight back: the queue's thread could starve
    behind a run of handed-back tasks)."""
    turns = TaskTurns()
    order = []
    queue_thread_waits = threading.Event()

    def queue_thread() -> None:
        queue_thread_waits.set()
        with turns:
            order.append("queue")

    with turns:  # the handed-back tasks' thread has the turn
        thread = threading.Thread(target=queue_thread, daemon=True)
        thread.start()
        assert queue_thread_waits.wait(WAIT_S)
        for _ in range(WAIT_S * 100):  # until the queue's thread has asked for its turn
            if turns.waiting:
                break
            time.sleep(0.01)
        assert turns.waiting == 1
    with turns:  # asks again at once: after the queue's thread
        order.append("handed")
    thread.join(WAIT_S)
    assert order == ["queue", "handed"]


def test_the_thread_answers_each_lot_in_its_turn_and_a_failure_stops_the_worker():
    handed = HandedTasks(Replies())
    turns = TaskTurns()
    answered, failures, first = [], [], threading.Event()

    def answer(records):
        if records[0].key == 13:
            raise RuntimeError("broken")
        answered.append([r.key for r in records])
        first.set()

    thread = HandedTaskThread(handed, turns, answer, failures.append, "handed").start()
    with turns:  # the queue's thread has the turn: the task waits for it
        handed.put(workflow_task(1))
        assert not first.wait(0.2)
    assert first.wait(WAIT_S)
    handed.put(workflow_task(13))
    thread._thread.join(WAIT_S)
    assert answered == [[1]] and [str(f) for f in failures] == ["broken"] and str(thread.failure) == "broken"


def test_a_turn_given_up_while_waiting_for_it_does_not_hold_up_the_turns_after_it():
    """`WorkflowWorker.run` on the main thread, Ctrl-C while the queue's thread waits for
    its turn: the KeyboardInterrupt leaves the wait. Its ticket is given up; kept, the
    handed-back tasks' thread would wait for that turn for ever, and the worker's stop
    with it (it waits for that thread to answer what it holds)."""
    turns = TaskTurns()
    held, release = threading.Event(), threading.Event()

    def handed_thread() -> None:
        with turns:
            held.set()
            release.wait(WAIT_S)

    holder = threading.Thread(target=handed_thread, daemon=True)
    holder.start()
    assert held.wait(WAIT_S)

    def interrupt(signum, frame):
        raise KeyboardInterrupt
    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        with pytest.raises(KeyboardInterrupt):
            with turns:  # the queue's thread (this one, the main thread) waits: interrupted
                pass
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    release.set()
    holder.join(WAIT_S)
    assert turns.waiting == 0
    served = threading.Event()

    def next_turn() -> None:
        with turns:
            served.set()
    threading.Thread(target=next_turn, daemon=True).start()
    assert served.wait(WAIT_S)


def test_a_failed_thread_stops_the_asks_at_once():
    """Once the thread for handed-back tasks is gone, no answer asks for a task back: the
    queue's thread may answer a whole batch more before it sees the stop, and each task
    handed back for it would wait for nobody until its timeout."""
    handed = HandedTasks(Replies(), lambda run_id: 4)  # every run cached, answered at event 4
    failures = []

    def answer(records):
        raise RuntimeError("broken")

    thread = HandedTaskThread(handed, TaskTurns(), answer, failures.append, "handed").start()
    handed.put(workflow_task(1))
    thread._thread.join(WAIT_S)
    assert [str(f) for f in failures] == ["broken"]
    assert handed.listen() is None and handed.ask_after_activity({}, "run") is None
