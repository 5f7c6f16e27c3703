"""The next workflow task rides with an eager activity's completion, on a real broker: a
remote step is one engine transaction, histories are the two-transaction path's event for
event, code that reads the task's time never rides along (its `workflow.now()` is the
engine's), and signals and queries that come meanwhile are all seen."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest

from streamproc import activity, workflow
from streamproc.client import Client
from streamproc.clock import ManualClock
from streamproc.semantics.workflow_events import EventType
from streamproc.semantics.workflow_history import check_well_formed
from streamproc.worker import Worker
from tests.support.engines import EngineThread

pytestmark = pytest.mark.kafka

QUEUE = "ride-along"
STEP = timedelta(seconds=10)


@activity.defn
def add_one(n: int) -> int:
    return n + 1


@workflow.defn
class Steps:
    def __init__(self) -> None:
        self.n = 0
        self.signals = 0

    @workflow.run
    async def run(self, steps: int) -> list[int]:
        for _ in range(steps):
            self.n = await workflow.execute_activity(add_one, self.n, start_to_close_timeout=STEP)
        return [self.n, self.signals]

    @workflow.signal
    def poke(self) -> None:
        self.signals += 1

    @workflow.query
    def progress(self) -> int:
        return self.n


@workflow.defn
class StampsSteps:
    """Reads the task's time after each step."""

    @workflow.run
    async def run(self, steps: int) -> list[int]:
        stamps = []
        for n in range(steps):
            await workflow.execute_activity(add_one, n, start_to_close_timeout=STEP)
            stamps.append(int(workflow.time() * 1000))
        return stamps


def _events(handle) -> list[dict]:
    events = handle.fetch_history().events
    assert check_well_formed([(e["event_id"], EventType[e["event_type"]], e["attributes"]) for e in events]) == []
    return events


@pytest.fixture
def engine(bootstrap, namespace, tmp_path):
    with EngineThread.on(bootstrap, namespace, tmp_path, "ride-along", partitions=2, clock=ManualClock()), \
            Client(bootstrap, namespace) as client:
        yield client


@pytest.mark.parametrize("disabled", [False, True])
def test_each_step_s_next_task_rides_with_its_completion(engine, disabled, monkeypatch):
    from streamproc.worker import ride_along

    monkeypatch.setattr(ride_along, "TURN_PATIENCE_S", 30.0)  # a slow machine's stall is no skip
    monkeypatch.setattr(ride_along, "WAIT_CAP_S", 30.0)
    with Worker(engine, task_queue=QUEUE, workflows=[Steps], activities=[add_one], identity="riding",
                disable_workflow_task_ride_along=disabled) as worker:
        handles = [engine.start_workflow(Steps.run, args=[4], id=f"steps-{disabled}-{n}", task_queue=QUEUE)
                   for n in range(3)]
        assert [h.result(60) for h in handles] == [[4, 0]] * 3
        stats = worker.workflow_worker.stats
        ride = worker.workflow_worker.handed.ride_along
        _until(lambda: ride is None or ride.sent == ride.accepted + ride.refused)  # the last verdicts heard
    for handle in handles:
        types = [e["event_type"] for e in _events(handle)]
        # Temporal's shape, as the two-transaction path writes it
        assert types == ["WORKFLOW_EXECUTION_STARTED", "WORKFLOW_TASK_SCHEDULED", "WORKFLOW_TASK_STARTED",
                         "WORKFLOW_TASK_COMPLETED", "ACTIVITY_TASK_SCHEDULED"] + [
            "ACTIVITY_TASK_STARTED", "ACTIVITY_TASK_COMPLETED", "WORKFLOW_TASK_SCHEDULED", "WORKFLOW_TASK_STARTED",
            "WORKFLOW_TASK_COMPLETED", "ACTIVITY_TASK_SCHEDULED"] * 3 + [
            "ACTIVITY_TASK_STARTED", "ACTIVITY_TASK_COMPLETED", "WORKFLOW_TASK_SCHEDULED", "WORKFLOW_TASK_STARTED",
            "WORKFLOW_TASK_COMPLETED", "WORKFLOW_EXECUTION_COMPLETED"]
    if disabled:
        assert ride is None and stats.completed == 15
    else:
        # Each run's first task is a task of its own; the next twelve ride along, those whose
        # activity ended while the worker ran another run's task too (they wait for the turn).
        assert (ride.sent, ride.accepted, ride.refused, dict(ride.skipped)) == (12, 12, 0, {})
        assert stats.completed == 3 and stats.handed_back == 0 and stats.history_fetches == 0
        assert (stats.rode_along, stats.ride_along_refused) == (ride.accepted, 0)


def test_code_that_reads_the_task_s_time_never_rides_and_reads_the_engine_s(engine):
    with Worker(engine, task_queue=QUEUE, workflows=[StampsSteps], activities=[add_one], identity="stamping") as worker:
        handle = engine.start_workflow(StampsSteps.run, args=[3], id="stamps", task_queue=QUEUE)
        stamps = handle.result(60)
        ride = worker.workflow_worker.handed.ride_along
    assert ride.accepted == 0 and "StampsSteps" in ride._not_tried
    scheduled = [e["event_time_ms"] for e in _events(handle) if e["event_type"] == "WORKFLOW_TASK_SCHEDULED"]
    assert stamps == scheduled[1:]  # each step's task's own WORKFLOW_TASK_SCHEDULED


def test_signals_and_queries_meanwhile_are_all_seen(engine):
    with Worker(engine, task_queue=QUEUE, workflows=[Steps], activities=[add_one], identity="busy") as worker:
        handles = [engine.start_workflow(Steps.run, args=[30], id=f"busy-{n}", task_queue=QUEUE) for n in range(3)]
        seen: list[list[int]] = [[] for _ in handles]
        done = threading.Event()

        def query_and_signal() -> None:
            while not done.is_set():
                for n, handle in enumerate(handles):
                    try:
                        seen[n].append(handle.query(Steps.progress))
                        handle.signal(Steps.poke)
                    except Exception:  # noqa: BLE001 - the run may have closed meanwhile
                        pass

        meddler = threading.Thread(target=query_and_signal)
        meddler.start()
        try:
            results = [h.result(120) for h in handles]
        finally:
            done.set()
            meddler.join(30)
        ride = worker.workflow_worker.handed.ride_along
    for handle, (n, signals), answers in zip(handles, results, seen):
        assert n == 30
        events = _events(handle)
        assert signals == sum(e["event_type"] == "WORKFLOW_EXECUTION_SIGNALED" for e in events)
        assert answers == sorted(answers) and all(0 <= a <= 30 for a in answers)  # never ahead, never back
    assert ride.accepted > 0


def test_refused_answers_fall_back_to_the_handed_back_task_which_replays(engine, monkeypatch):
    """Every answer names a next event id one past the run's, as a worker whose count is off
    would: each is refused, the instance dropped, and the handed-back task replays the run."""
    from streamproc.worker.ride_along import RideAlong

    counted = RideAlong._next_task_events
    monkeypatch.setattr(RideAlong, "_next_task_events",
                        lambda self, *args: (lambda events, n: (events, n + 1))(*counted(self, *args)))
    with Worker(engine, task_queue=QUEUE, workflows=[Steps], activities=[add_one], identity="miscounting") as worker:
        handles = [engine.start_workflow(Steps.run, args=[4], id=f"refused-{n}", task_queue=QUEUE) for n in range(3)]
        assert [h.result(60) for h in handles] == [[4, 0]] * 3
        stats = worker.workflow_worker.stats
        ride, activities = worker.workflow_worker.handed.ride_along, worker.activity_worker
        _until(lambda: ride.sent == ride.accepted + ride.refused)  # the last verdict heard
        _until(lambda: _in_flight(activities) == 0)  # each refusal gave its handed slot back once
        time.sleep(0.2)
        assert _in_flight(activities) == 0
    assert _in_flight(activities) == 0
    assert ride.sent >= 6 and (ride.accepted, ride.refused) == (0, ride.sent)
    assert stats.history_fetches == ride.sent and stats.completed == 15  # each refused step replayed
    for handle in handles:
        types = [e["event_type"] for e in _events(handle)]
        assert types.count("WORKFLOW_TASK_COMPLETED") == 5 and "WORKFLOW_TASK_FAILED" not in types


#: The turn the workflow worker's threads take to run tasks (set once the worker runs), and
#: what the two runs of the busy-worker test tell each other.
BUSY: dict = {}


@activity.defn
def add_one_while_another_task_runs(n: int) -> int:
    """Ends while the worker runs another run's task (`HoldsTheTurn`)."""
    assert BUSY["holding"].wait(30)
    return n + 1


@activity.defn
def hold_the_turn() -> str:
    """A local activity: its task holds the worker's turn until a completion waits for it."""
    BUSY["holding"].set()
    deadline = time.monotonic() + 30
    while not BUSY["turns"].waiting and time.monotonic() < deadline:
        time.sleep(0.005)
    return "held"


@workflow.defn
class OneBusyStep:
    @workflow.run
    async def run(self) -> int:
        return await workflow.execute_activity(add_one_while_another_task_runs, 1, start_to_close_timeout=STEP)


@workflow.defn
class HoldsTheTurn:
    @workflow.run
    async def run(self) -> str:
        return await workflow.execute_local_activity(hold_the_turn, start_to_close_timeout=STEP)


def test_a_completion_that_ends_while_the_worker_runs_another_run_s_task_still_rides_along(engine, monkeypatch):
    """The worker is running another run's task when the activity completes (the usual case
    under load): the completion waits for its turn and carries the next task's answer,
    rather than going alone and costing the run a transaction and a handed-back task.
    (The patience is raised so that a slow machine cannot make the wait give up.)"""
    from streamproc.worker import ride_along

    monkeypatch.setattr(ride_along, "TURN_PATIENCE_S", 30.0)
    monkeypatch.setattr(ride_along, "WAIT_CAP_S", 30.0)
    BUSY["holding"] = threading.Event()
    with Worker(engine, task_queue=QUEUE, workflows=[OneBusyStep, HoldsTheTurn],
                activities=[add_one_while_another_task_runs], identity="busy-worker") as worker:
        BUSY["turns"] = worker.workflow_worker._turns
        stepping = engine.start_workflow(OneBusyStep.run, id="busy-step", task_queue=QUEUE)
        _until(lambda: worker.activity_worker.stats.started == 1)  # its task answered, cached
        holding = engine.start_workflow(HoldsTheTurn.run, id="holds-the-turn", task_queue=QUEUE)
        assert (stepping.result(60), holding.result(60)) == (2, "held")
        ride, stats = worker.workflow_worker.handed.ride_along, worker.workflow_worker.stats
        _until(lambda: ride.sent == ride.accepted + ride.refused)  # the verdict heard
    assert (ride.sent, ride.accepted, dict(ride.skipped)) == (1, 1, {})
    assert stats.handed_back == 0 and stats.completed == 2  # each run's first task; the step rode along
    types = [e["event_type"] for e in _events(stepping)]
    assert types[-5:] == ["ACTIVITY_TASK_COMPLETED", "WORKFLOW_TASK_SCHEDULED", "WORKFLOW_TASK_STARTED",
                          "WORKFLOW_TASK_COMPLETED", "WORKFLOW_EXECUTION_COMPLETED"]


def _in_flight(activities) -> int:
    """The activity worker's slots taken (running, held for eager activities, handed on)."""
    with activities._lock:
        return activities._in_flight


def _until(condition, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "not within the wait"
        time.sleep(0.01)


def test_with_every_slot_busy_the_next_step_still_runs_eagerly_in_the_last_one_s_slot(engine, monkeypatch):
    """One activity slot: the answer riding with a step's completion asks for the next step
    in that step's slot (it is done), rather than finding none free and sending the next
    step through the task queue (a START, a task record and a transaction more)."""
    from streamproc.worker import ride_along

    monkeypatch.setattr(ride_along, "TURN_PATIENCE_S", 30.0)
    monkeypatch.setattr(ride_along, "WAIT_CAP_S", 30.0)
    with Worker(engine, task_queue=QUEUE, workflows=[Steps], activities=[add_one], identity="one-slot",
                max_concurrent_activities=1) as worker:
        assert engine.start_workflow(Steps.run, args=[4], id="one-slot", task_queue=QUEUE).result(60) == [4, 0]
        ride, activities = worker.workflow_worker.handed.ride_along, worker.activity_worker
        _until(lambda: ride.sent == ride.accepted + ride.refused)  # the last verdict heard
        _until(lambda: _in_flight(activities) == 0)  # each slot handed on freed once, not twice
        time.sleep(0.2)
        assert _in_flight(activities) == 0
    assert _in_flight(activities) == 0
    assert (ride.sent, ride.accepted) == (4, 4)
    assert (activities.stats.started, activities.stats.eager) == (4, 4)
