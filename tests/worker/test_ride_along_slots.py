"""The activity slot an attempt hands on to its run's next activity when the next task's
answer rides with its completion (`ActivityWorker.hand_slot_on`, `EagerActivities.reserve`):
freed exactly once whatever the engine answers, and never handed on by a worker that stops.
A real ActivityWorker, its attempts, RideAlong and EagerActivities; the engine's replies
given by hand (no broker)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import orjson
import pytest

from streamproc import activity
from streamproc.kafka.replies import Reply
from streamproc.protocol.records import Record, RecordType
from streamproc.worker import ride_along
from streamproc.worker.activity_worker import ActivityWorker
from streamproc.worker.eager_activities import EagerActivities
from streamproc.worker.handed_tasks import HandedTasks
from streamproc.worker.ride_along import RideAlong
from streamproc.worker.sticky_cache import StickyCache
from streamproc.worker.task_turns import TaskTurns
from streamproc.worker.workflow_activation import WorkflowTaskHandler
from tests.worker.test_ride_along import TwoSteps, verdict
from tests.workflow.history import Run

#: A bound on waits that end as soon as what they wait for happens.
WAIT_S = 10


@activity.defn(name="step")
def step(n: int) -> int:
    return n + 1


class Replies:
    """The activity worker's replies listener: who waits for what (answered by hand)."""

    partition = 0

    def __init__(self) -> None:
        self.waiting, self.prefixes = {}, {}

    def expect(self, request_id, callback, ttl_s):
        self.waiting[request_id] = callback

    def expect_prefix(self, prefix, callback):
        self.prefixes[prefix] = callback


class Harness:
    """One activity slot, a run cached by the workflow side after its first task (one
    activity scheduled), and what the activity worker sends."""

    def __init__(self) -> None:
        self.worker = worker = ActivityWorker("orders", [step], bootstrap="127.0.0.1:9", max_concurrent=1)
        worker.replies = Replies()
        worker._executor = ThreadPoolExecutor(2, thread_name_prefix="activity")
        self.sent: list[tuple[str, dict, object]] = []
        worker.send = lambda key, intent, value, request_id=None, on_reply=None, ttl_s=600: \
            self.sent.append((intent, value, on_reply))
        self.run = run = Run(TwoSteps)
        run.step()
        cache = StickyCache(10)
        cache.restore("run-1", run.instance, run.history.events[1])
        handler = WorkflowTaskHandler({}, "worker", lambda *a: None, cache)
        handler.eager = EagerActivities(worker)
        self.handed = HandedTasks(worker.replies, cache.answered_event_id, cache.forget_answer)
        self.ride = self.handed.ride_along = RideAlong(handler, self.handed, TaskTurns())
        worker.workflow_tasks = self.handed

    def task(self, activity_id: str = "1", run_id: str = "run-1", key: int = 7) -> Record:
        return Record(RecordType.EVENT, "ACTIVITY_TASK", "ACTIVITY_TASK", {
            "activity_id": activity_id, "activity_type": "step", "task_queue": "orders", "attempt": 1,
            "input": "[1]", "heartbeat_details": None, "first_scheduled_time_ms": 1, "scheduled_time_ms": 1,
            "started_time_ms": 2, "schedule_to_close_timeout_ms": 0, "start_to_close_timeout_ms": 60_000,
            "heartbeat_timeout_ms": 0, "workflow_id": "wf-1" if run_id else "", "run_id": run_id,
            "workflow_type": "TwoSteps", "scheduled_event_id": self.run.history._activities.get(activity_id, 0),
            "identity": "worker"}, key=key)

    def complete_first_step(self):
        """Run the first step in the one slot (as the engine started it eagerly): its
        COMPLETE's value and what hears its replies."""
        with self.worker._lock:
            self.worker._in_flight += 1  # as `_take` and `reserve_slot` do
        self.worker._run_attempt(self.task(), eager=True)
        ((intent, value, on_reply),) = self.sent
        assert intent == "COMPLETE"
        return value, on_reply

    def in_flight(self) -> int:
        with self.worker._lock:
            return self.worker._in_flight

    def settled(self) -> int:
        """The in-flight count once every attempt the executor has ended (one more would free twice)."""
        deadline = time.monotonic() + WAIT_S
        while self.worker._running or self.in_flight() > 0:
            assert time.monotonic() < deadline, "not within the wait"
            time.sleep(0.01)
        time.sleep(0.05)
        return self.in_flight()


def _asks_eagerly(value: dict) -> bool:
    return orjson.loads(value["workflow_task_answer"])["commands"][0].get("request_eager_execution") is True


def test_an_accepted_answer_s_eager_activity_runs_in_the_handed_slot_and_frees_it_once():
    h = Harness()
    value, on_reply = h.complete_first_step()
    assert _asks_eagerly(value) and h.in_flight() == 1  # the slot went on, not freed
    assert on_reply(Reply(verdict(True), 0)) is False  # its eager activity comes next
    assert on_reply(Reply(h.task("2", run_id="", key=8), 0)) is False
    assert on_reply(Reply(Record(RecordType.EVENT, "WORKFLOW", "TASK_PROCESSED", {"run_id": "run-1"}, key=9),
                          0)) is True
    assert h.settled() == 0 and h.worker.stats.eager == 1
    assert [intent for intent, _, _ in h.sent] == ["COMPLETE", "COMPLETE"]


def test_a_refused_answer_gives_the_handed_slot_back_once():
    h = Harness()
    value, on_reply = h.complete_first_step()
    assert _asks_eagerly(value) and h.in_flight() == 1
    assert on_reply(Reply(verdict(False), 0)) is True
    assert h.settled() == 0


def test_a_rejected_completion_gives_the_handed_slot_back_once():
    h = Harness()
    value, on_reply = h.complete_first_step()
    rejection = Record(RecordType.COMMAND_REJECTION, "ACTIVITY_TASK", "COMPLETE", {"attempt": 1}, key=7,
                       rejection_type="INVALID_STATE", rejection_reason="attempt over")
    assert on_reply(Reply(rejection, 0)) is True
    assert h.settled() == 0


def test_an_answer_too_large_gives_the_handed_slot_back_before_the_completion_goes(monkeypatch):
    monkeypatch.setattr(ride_along, "ANSWER_BUDGET_BYTES", 50)
    h = Harness()
    value, _ = h.complete_first_step()
    assert "workflow_task_answer" not in value and h.ride.skipped == {"answer_too_large": 1}
    assert h.settled() == 0


def test_a_stopping_worker_hands_no_slot_on_and_sends_no_answer_ahead():
    """At shutdown a handed slot would ask the engine to start the run's next activity for
    this worker, whose task would come after the pool shut down (dropped, the activity
    stranded until its start-to-close timeout): the completion goes alone, counted."""
    h = Harness()
    h.worker.stop()
    value, _ = h.complete_first_step()
    assert "workflow_task_answer" not in value and h.ride.skipped == {"stopping": 1}
    assert h.settled() == 0


@pytest.mark.parametrize("how", ["stopped", "pool_gone"])
def test_a_slot_is_not_handed_on_once_the_worker_stops_or_its_pool_is_gone(how):
    """The refusal is taken under the worker's lock, as `reserve_slot`'s: a stop that comes
    after the completion decided to ride along still keeps the slot from going on."""
    h = Harness()

    class Attempt:
        slot_handed = False
    if how == "stopped":
        h.worker.stop()
    else:
        h.worker._executor = None
    attempt = Attempt()
    assert h.worker.hand_slot_on(attempt) is False and attempt.slot_handed is False
    h.worker._stop.clear()
    h.worker._executor = ThreadPoolExecutor(1)
    assert h.worker.hand_slot_on(attempt) is True and h.worker.hand_slot_on(attempt) is False


def test_a_completion_near_its_attempt_s_deadline_does_not_wait_in_line_past_it(monkeypatch):
    """The attempt passes its deadline (start-to-close here) to the wait in line: with the
    workflow worker's turn held, a step with 0.8 s to live goes alone well before then."""
    import threading

    monkeypatch.setattr(ride_along, "TURN_PATIENCE_S", 30.0)
    monkeypatch.setattr(ride_along, "WAIT_CAP_S", 30.0)
    h = Harness()
    task = h.task()
    task.value["start_to_close_timeout_ms"] = 800
    with h.worker._lock:
        h.worker._in_flight += 1
    with h.ride.turns:  # another run's task runs meanwhile
        thread = threading.Thread(target=h.worker._run_attempt, args=(task,), kwargs={"eager": True}, daemon=True)
        thread.start()
        thread.join(5)
        assert not thread.is_alive()
    ((intent, value, _),) = h.sent
    assert intent == "COMPLETE" and "workflow_task_answer" not in value and h.ride.skipped == {"no_turn": 1}
    assert h.settled() == 0
