"""The worker side of answering a run's next task with its activity's completion
(`worker/ride_along.py`), on real workflow code and histories written as the engine writes
them (no broker): what the answer holds, when none is sent, and what a verdict does to the
sticky cache."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import orjson

from streamproc import workflow
from streamproc.activity.payloads import encode
from streamproc.kafka.replies import Reply
from streamproc.protocol.records import Record, RecordType
from streamproc.worker.handed_tasks import HandedTasks
from streamproc.worker import ride_along
from streamproc.worker.ride_along import RideAlong
from streamproc.worker.sticky_cache import StickyCache
from streamproc.worker.task_turns import TaskTurns
from streamproc.worker.workflow_activation import WorkflowTaskHandler
from tests.workflow.history import Run

TIMEOUT = timedelta(seconds=10)
#: A bound on waits that end as soon as what they wait for happens.
WAIT_S = 10


@workflow.defn(name="TwoSteps")
class TwoSteps:
    @workflow.run
    async def run(self) -> int:
        first = await workflow.execute_activity("step", 1, start_to_close_timeout=TIMEOUT)
        return await workflow.execute_activity("step", first + 1, start_to_close_timeout=TIMEOUT)


@workflow.defn(name="ReadsNow")
class ReadsNow:
    @workflow.run
    async def run(self) -> str:
        await workflow.execute_activity("step", 1, start_to_close_timeout=TIMEOUT)
        return workflow.now().isoformat()


@workflow.defn(name="LocalNext")
class LocalNext:
    @workflow.run
    async def run(self) -> int:
        first = await workflow.execute_activity("step", 1, start_to_close_timeout=TIMEOUT)
        return await workflow.execute_local_activity(_never_called, first, start_to_close_timeout=TIMEOUT)


CALLS = []


def _never_called(value: int) -> int:
    CALLS.append(value)
    return value


def cached_after_first_task(workflow_cls):
    """A run whose first task was answered (one activity scheduled) and recorded by the engine,
    its instance cached as a sticky worker leaves it; returns (ride, run, the activity task)."""
    run = Run(workflow_cls)
    run.step()
    cache = StickyCache(10)
    cache.restore("run-1", run.instance, run.history.events[1])  # the first WORKFLOW_TASK_SCHEDULED
    handler = WorkflowTaskHandler({}, "worker", lambda *a: None, cache)
    ride = RideAlong(handler, HandedTasks(None), TaskTurns())
    scheduled_id = run.history._activities["1"]
    activity = {"run_id": "run-1", "workflow_type": run.definition.name, "scheduled_event_id": scheduled_id,
                "identity": "worker", "attempt": 1}
    return ride, run, activity


def verdict(accepted, scheduled=None):
    value = {"workflow_id": "wf-1", "run_id": "run-1",
             "attributes": orjson.dumps({"accepted": accepted, "reason": ""}).decode()}
    if scheduled is not None:
        value["history"] = orjson.dumps([scheduled]).decode()
    return Record(RecordType.EVENT, "WORKFLOW", "RODE_ALONG", value, key=9)


def test_the_answer_is_the_next_task_s_on_the_events_the_engine_writes():
    ride, run, activity = cached_after_first_task(TwoSteps)
    value = {"return_workflow_task_after": 2, "result": encode(1)}
    assert ride.ask(value, activity, encode(1)) is not None
    answer = orjson.loads(value["workflow_task_answer"])
    # What the engine writes if nothing comes between: the same ids, the same events.
    run.history.activity_completed("1", 1)
    scheduled = run.history.schedule_task()
    assert answer["next_event_id"] == scheduled["event_id"] - 2
    shown = [(e["event_id"], e["event_type"]) for e in run.instance._history]
    assert shown == [(e["event_id"], e["event_type"]) for e in run.history.events]
    assert [c["type"] for c in answer["commands"]] == ["SCHEDULE_ACTIVITY_TASK"]
    assert answer["commands"][0]["input"] == encode([2]) and answer["identity"] == "worker"
    assert answer["attributes"] == {"return_new_workflow_task": True}
    assert "run-1" not in ride.handler.cache  # out until the verdict

    # Accepted: back in the cache, as of the task the engine wrote.
    assert ride.settle(verdict(True, scheduled)) is True
    instance, answered = ride.handler.cache.entry("run-1")
    assert instance is run.instance and answered == scheduled and run.instance._history[-1] is answered


def test_a_refused_answer_drops_the_instance():
    ride, run, activity = cached_after_first_task(TwoSteps)
    value = {"return_workflow_task_after": 2}
    ride.ask(value, activity, encode(1))
    assert ride.settle(verdict(False)) is False
    assert "run-1" not in ride.handler.cache and ride.refused == 1


def test_code_that_reads_the_task_s_time_sends_no_answer_and_its_type_is_not_tried_again():
    ride, run, activity = cached_after_first_task(ReadsNow)
    value = {"return_workflow_task_after": 2}
    assert ride.ask(value, activity, encode(1)) is None
    assert "workflow_task_answer" not in value and "run-1" not in ride.handler.cache
    assert "ReadsNow" in ride._not_tried


def test_code_that_calls_a_local_activity_next_sends_no_answer_and_starts_nothing():
    ride, run, activity = cached_after_first_task(LocalNext)
    value = {"return_workflow_task_after": 2}
    assert ride.ask(value, activity, encode(1)) is None
    assert "workflow_task_answer" not in value and CALLS == []
    assert "LocalNext" in ride._not_tried


def test_no_answer_when_the_cache_is_elsewhere_or_a_task_of_the_run_waits():
    ride, run, activity = cached_after_first_task(TwoSteps)
    assert ride.ask({"return_workflow_task_after": 1}, activity, encode(1)) is None  # not the cached task
    ride.handed.put(Record(RecordType.EVENT, "WORKFLOW", "WORKFLOW_TASK", {"run_id": "run-1"}, key=9))
    assert ride.ask({"return_workflow_task_after": 2}, activity, encode(1)) is None
    assert "run-1" in ride.handler.cache  # left as it was


def _ask_on_a_thread(ride, activity):
    """`ride.ask` for the run's step, on a thread of its own (an activity's): (its result
    once it returns, the thread)."""
    got = []
    thread = threading.Thread(target=lambda: got.append(
        ride.ask({"return_workflow_task_after": 2}, activity, encode(1))), daemon=True)
    thread.start()
    return got, thread


def _until(condition) -> None:
    for _ in range(WAIT_S * 100):
        if condition():
            return
        time.sleep(0.01)
    raise AssertionError("not within the wait")


def test_a_completion_waits_for_the_turn_another_run_s_task_has(monkeypatch):
    """Under load the workflow worker is nearly always running some other run's task: a
    completion that gave up then went alone, and its run's next task cost a transaction
    and a hand-back (at 100 in flight, 7 completions in 10). It takes its turn in line."""
    monkeypatch.setattr(ride_along, "TURN_PATIENCE_S", WAIT_S)
    monkeypatch.setattr(ride_along, "WAIT_CAP_S", WAIT_S)
    ride, run, activity = cached_after_first_task(TwoSteps)
    with ride.turns:  # the queue's thread runs another run's task
        got, thread = _ask_on_a_thread(ride, activity)
        _until(lambda: ride.turns.waiting == 1)
        assert not got
    thread.join(WAIT_S)
    assert got and got[0] is not None and ride.sent == 1 and not ride.skipped


def test_a_completion_goes_alone_when_the_turns_stop_moving(monkeypatch):
    """The thread that has the turn is held up (a task waiting on its local activities, a
    history fetch): the completion does not wait on it longer than `TURN_PATIENCE_S` with
    no turn changing hands, and the turns after it are not held up by its ticket."""
    monkeypatch.setattr(ride_along, "TURN_PATIENCE_S", 0.05)
    ride, run, activity = cached_after_first_task(TwoSteps)
    with ride.turns:
        got, thread = _ask_on_a_thread(ride, activity)
        thread.join(WAIT_S)
        assert got == [None] and ride.skipped == {"no_turn": 1} and "run-1" in ride.handler.cache
    with ride.turns:  # the given-up ticket is skipped
        pass


def test_every_completion_without_an_answer_is_counted_by_reason():
    from streamproc.metrics.worker_metrics import WorkerMetrics
    from streamproc.worker.workflow_worker_stats import WorkflowWorkerStats

    ride, run, activity = cached_after_first_task(TwoSteps)
    ride.stats, ride.metrics, ride.task_queue = WorkflowWorkerStats(), WorkerMetrics(), "orders"
    assert ride.ask({"return_workflow_task_after": 1}, activity, encode(1)) is None
    ride.handed.put(Record(RecordType.EVENT, "WORKFLOW", "WORKFLOW_TASK", {"run_id": "run-1"}, key=9))
    assert ride.ask({"return_workflow_task_after": 2}, activity, encode(1)) is None
    ride.handed.take()
    assert ride.ask({"return_workflow_task_after": 2}, activity, encode(1)) is not None
    assert ride.ask({"return_workflow_task_after": 2}, activity, encode(1)) is None  # out of the cache now
    ride._out.clear()
    ride.skip("not_cached")  # as the activity's attempt counts a run it did not ask for
    expected = {"cache_moved": 1, "task_held": 1, "not_cached": 2}
    assert ride.skipped == expected and ride.stats.ride_along_skipped == expected
    assert ride.stats.ride_along_sent == 1 and set(expected) <= set(ride_along.SKIP_REASONS)
    sample = ride.metrics.registry.get_sample_value
    assert sample("streamproc_workflow_task_ride_along_skipped_total",
                  {"task_queue": "orders", "reason": "not_cached"}) == 2

    ride, run, activity = cached_after_first_task(ReadsNow)
    ride.ask({"return_workflow_task_after": 2}, activity, encode(1))
    ride.ask({"return_workflow_task_after": 2}, activity, encode(1))
    assert ride.skipped == {"code_read_time": 1, "type_not_tried": 1}


class _HeldSlots:
    """An eager-activity reservation stand-in: counts what it gives back."""

    def __init__(self):
        self.released = 0

    def reserve(self, commands, handed_slot=None):
        return commands, self

    def release(self):
        self.released += 1


def test_an_answer_that_fails_half_way_is_not_sent_and_gives_its_slots_back():
    """The answer goes into the COMPLETE last: a failure after the slots were reserved (as
    `_out` changing under the listener's thread once did) sends the completion without it,
    rather than an answer whose verdict and eager activities nobody hears."""
    ride, run, activity = cached_after_first_task(TwoSteps)
    ride.handler.eager = slots = _HeldSlots()

    def broken():
        raise RuntimeError("dictionary changed size during iteration")
    class Racing(dict):  # as `_out` changing under another thread once made it raise
        def __setitem__(self, key, value):
            broken()
    ride._out = Racing()
    value = {"return_workflow_task_after": 2}
    assert ride.ask(value, activity, encode(1)) is None
    assert "workflow_task_answer" not in value and slots.released == 1
    assert "run-1" not in ride.handler.cache and ride.sent == 0



@workflow.defn(name="PassesOn")
class PassesOn:
    @workflow.run
    async def run(self) -> str:
        first = await workflow.execute_activity("step", 1, start_to_close_timeout=TIMEOUT)
        return await workflow.execute_activity("step", first, start_to_close_timeout=TIMEOUT)


def test_an_answer_too_large_to_go_with_the_result_is_not_sent():
    """A large result the code passes on to its next activity is in the COMPLETE twice (the
    second time JSON-escaped again): past the budget the completion goes alone, rather than
    a command the broker refuses, whose result would be lost and the activity run again."""
    ride, run, activity = cached_after_first_task(PassesOn)
    ride.handler.eager = slots = _HeldSlots()
    result = encode('"' * 100_000)  # 100 KB, twice as much escaped
    value = {"return_workflow_task_after": 2, "result": result}
    assert ride.ask(value, activity, result) is None
    assert "workflow_task_answer" not in value and slots.released == 1 and ride.sent == 0
    assert "run-1" not in ride.handler.cache  # it ran ahead: the task replays

    ride, run, activity = cached_after_first_task(PassesOn)
    small = encode("x" * 1000)
    value = {"return_workflow_task_after": 2, "result": small}
    assert ride.ask(value, activity, small) is not None and "workflow_task_answer" in value


def test_an_answer_whose_verdict_never_came_holds_its_run_only_for_a_while():
    """A lost verdict (the engine away): past `VERDICT_S` the run's next completion may
    carry an answer again, without waiting for another run's answer to purge it."""
    ride, run, activity = cached_after_first_task(TwoSteps)
    ride._out["run-1"] = (None, {"event_id": 0}, False, ride_along.time.monotonic() - ride_along.VERDICT_S - 1)
    value = {"return_workflow_task_after": 2}
    assert ride.ask(value, activity, encode(1)) is not None and "workflow_task_answer" in value


def test_tasks_that_ride_along_are_seen_in_prometheus():
    from streamproc.metrics.worker_metrics import WorkerMetrics
    metrics = WorkerMetrics()
    for accepted in (True, False):
        ride, run, activity = cached_after_first_task(TwoSteps)
        ride.metrics, ride.task_queue = metrics, "orders"
        ride.ask({"return_workflow_task_after": 2}, activity, encode(1))
        run.history.activity_completed("1", 1)
        ride.settle(verdict(accepted, run.history.schedule_task()))
    sample = metrics.registry.get_sample_value
    assert sample("streamproc_workflow_task_execution_latency_seconds_count", {"task_queue": "orders"}) == 2
    for outcome in ("accepted", "refused"):
        assert sample("streamproc_workflow_task_ride_along_total", {"task_queue": "orders", "verdict": outcome}) == 1


class _BusyActivities:
    """An activity worker stand-in whose every slot is taken."""

    replies, task_queue, definitions = object(), "orders", {"step"}

    def __init__(self):
        self.in_flight = 1

    def reserve_slot(self):
        return False

    def release_slot(self):
        self.in_flight -= 1


def test_the_activity_s_slot_goes_on_to_the_run_s_next_activity():
    """With every slot busy (as many runs in flight as slots), the answer's next activity
    still runs eagerly here, in the slot of the activity whose completion it rides with;
    given back once, if the engine does not fill it."""
    from streamproc.worker.eager_activities import EagerActivities

    ride, run, activity = cached_after_first_task(TwoSteps)
    ride.handler.eager = EagerActivities(busy := _BusyActivities())
    handed = []
    value = {"return_workflow_task_after": 2}
    on_reply = ride.ask(value, activity, encode(1), lambda: not handed and not handed.append(1))
    answer = orjson.loads(value["workflow_task_answer"])
    assert answer["commands"][0].get("request_eager_execution") is True and handed == [1]
    assert on_reply(Reply(verdict(False), 0)) is True and busy.in_flight == 0  # refused: the slot is free

    ride, run, activity = cached_after_first_task(TwoSteps)
    ride.handler.eager = EagerActivities(_BusyActivities())
    value = {"return_workflow_task_after": 2}
    ride.ask(value, activity, encode(1))  # no slot to hand on: the next activity goes through the queue
    assert "request_eager_execution" not in orjson.loads(value["workflow_task_answer"])["commands"][0]


def test_a_completion_that_gets_the_turn_after_the_hand_back_stopped_reserves_nothing():
    """The worker stops while the completion waits in line: the slots held for answers are
    given back once (`WorkflowWorker._give_back_slots`), so a reservation made after that
    would never be, and the activity worker would wait its whole graceful timeout for it."""
    ride, run, activity = cached_after_first_task(TwoSteps)
    ride.handler.eager = slots = _HeldSlots()
    reserved = []
    slots.reserve = lambda commands, handed_slot=None: reserved.append(1) or (commands, slots)
    with ride.turns:
        got, thread = _ask_on_a_thread(ride, activity)
        _until(lambda: ride.turns.waiting == 1)
        ride.handed.stop()
    thread.join(WAIT_S)
    assert got == [None] and not reserved and ride.skipped == {"stopping": 1}
    assert "run-1" in ride.handler.cache and ride.sent == 0


def test_the_workflow_worker_gives_the_slots_back_in_its_turn():
    """A completion riding along that has the turn is between its reservation and its send:
    the slots are given back only once it leaves the turn."""
    from streamproc.worker.workflow_worker import WorkflowWorker

    worker = WorkflowWorker("orders", [TwoSteps], bootstrap="127.0.0.1:9")
    released = threading.Event()

    class Slots:
        def release_all(self):
            released.set()
    worker.handler.eager = Slots()
    with worker._turns:
        thread = threading.Thread(target=worker._give_back_slots, daemon=True)
        thread.start()
        _until(lambda: worker._turns.waiting == 1)
        assert not released.wait(0.05)
    thread.join(WAIT_S)
    assert released.is_set()


def _ask_with_deadline_on_a_thread(ride, activity, deadline):
    got = []
    thread = threading.Thread(target=lambda: got.append(
        ride.ask({"return_workflow_task_after": 2}, activity, encode(1), None, deadline)), daemon=True)
    thread.start()
    return got, thread


def test_a_completion_stops_waiting_before_its_attempt_s_deadline_however_the_line_moves(monkeypatch):
    """An activity that finishes just before its start-to-close (or heartbeat) deadline
    must not wait in line past it: the engine would refuse the completion and retry the
    activity. The wait ends `DEADLINE_MARGIN_S` before the deadline, the completion going alone."""
    monkeypatch.setattr(ride_along, "TURN_PATIENCE_S", WAIT_S)
    monkeypatch.setattr(ride_along, "WAIT_CAP_S", WAIT_S)
    ride, run, activity = cached_after_first_task(TwoSteps)
    with ride.turns:
        began = time.monotonic()
        got, thread = _ask_with_deadline_on_a_thread(ride, activity, began + ride_along.DEADLINE_MARGIN_S + 0.1)
        thread.join(WAIT_S)
        assert got == [None] and ride.skipped == {"no_turn": 1}
        assert 0.1 <= time.monotonic() - began < WAIT_S / 2
    ride, run, activity = cached_after_first_task(TwoSteps)
    with ride.turns:  # already too close: no wait at all
        got, thread = _ask_with_deadline_on_a_thread(ride, activity, time.monotonic() + 0.1)
        thread.join(WAIT_S)
        assert got == [None] and ride.skipped == {"no_turn": 1}


def test_a_completion_waits_in_line_no_longer_than_the_cap(monkeypatch):
    monkeypatch.setattr(ride_along, "TURN_PATIENCE_S", WAIT_S)
    monkeypatch.setattr(ride_along, "WAIT_CAP_S", 0.1)
    ride, run, activity = cached_after_first_task(TwoSteps)
    with ride.turns:
        began = time.monotonic()
        got, thread = _ask_on_a_thread(ride, activity)
        thread.join(WAIT_S)
        assert got == [None] and ride.skipped == {"no_turn": 1} and time.monotonic() - began < WAIT_S / 2


def test_no_answer_while_a_task_of_the_run_taken_by_the_worker_s_thread_waits_for_its_turn():
    """The thread for handed-back tasks took the run's task and waits in line to run it: the
    completion must not run the run's next task ahead of it (it would answer a task whose
    history the cache has not seen); once answered, the run rides along again."""
    ride, run, activity = cached_after_first_task(TwoSteps)
    task = Record(RecordType.EVENT, "WORKFLOW", "WORKFLOW_TASK", {"run_id": "run-1"}, key=9)
    ride.handed.put(task)
    taken = ride.handed.wait_for_tasks()
    assert ride.ask({"return_workflow_task_after": 2}, activity, encode(1)) is None
    assert ride.skipped == {"task_held": 1}
    ride.handed.answered(taken)
    assert not ride.handed.holds_task_for("run-1")
    assert ride.ask({"return_workflow_task_after": 2}, activity, encode(1)) is not None


def test_the_ask_is_read_again_in_the_turn_when_the_cache_moved_while_the_completion_waited():
    """The completion asked after the task cached when it ended; a task of the run answered
    while it waited in line moved the cache on. Read again in the turn, the ask names the
    task cached now, and the answer rides along rather than going as `cache_moved`."""
    ride, run, activity = cached_after_first_task(TwoSteps)
    ride.handed.cached_at = ride.handler.cache.answered_event_id
    value = {"return_workflow_task_after": 1}  # the cache's task before the one answered meanwhile
    assert ride.ask(value, activity, encode(1)) is not None and "workflow_task_answer" in value
    assert value["return_workflow_task_after"] == 2 and not ride.skipped
