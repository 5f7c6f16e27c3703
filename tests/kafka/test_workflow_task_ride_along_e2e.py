"""The next workflow task rides with an eager activity's completion, on a real broker: a
remote step is one engine transaction, histories are the two-transaction path's event for
event, code that reads the task's time never rides along (its `workflow.now()` is the
engine's), and signals and queries that come meanwhile are all seen."""

from __future__ import annotations

import threading
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
def test_each_step_s_next_task_rides_with_its_completion(engine, disabled):
    with Worker(engine, task_queue=QUEUE, workflows=[Steps], activities=[add_one], identity="riding",
                disable_workflow_task_ride_along=disabled) as worker:
        handles = [engine.start_workflow(Steps.run, args=[4], id=f"steps-{disabled}-{n}", task_queue=QUEUE)
                   for n in range(3)]
        assert [h.result(60) for h in handles] == [[4, 0]] * 3
        stats = worker.workflow_worker.stats
        ride = worker.workflow_worker.handed.ride_along
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
        # Each run's first task is a task of its own; the next twelve ride along, but for
        # those whose activity ended while the worker ran another run's task (then handed back).
        assert ride.sent >= 6 and (ride.accepted, ride.refused) == (ride.sent, 0)
        assert stats.completed == 3 + 12 - ride.sent == 3 + stats.handed_back and stats.history_fetches == 0
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
        ride = worker.workflow_worker.handed.ride_along
    assert ride.sent >= 6 and (ride.accepted, ride.refused) == (0, ride.sent)
    assert stats.history_fetches == ride.sent and stats.completed == 15  # each refused step replayed
    for handle in handles:
        types = [e["event_type"] for e in _events(handle)]
        assert types.count("WORKFLOW_TASK_COMPLETED") == 5 and "WORKFLOW_TASK_FAILED" not in types
