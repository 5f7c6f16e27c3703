"""The next workflow task handed straight back to the worker on a real broker: a worker that
checkpoints its local activities after another command (not journaled) gets each step's
next task as a reply to its answer (no trip through the task queue), histories as the
queue path writes them; with the option off every task comes through the queue. Journaled
checkpoints keep the steps in one task."""

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

QUEUE = "hand-back"
STEP = timedelta(seconds=10)


@activity.defn
def add_one(n: int) -> int:
    return n + 1


@workflow.defn
class Steps:
    """Adds one `steps` times: by local activities, or by activities through the engine."""

    @workflow.run
    async def run(self, steps: int, local: bool, patch_first: bool = False) -> int:
        execute = workflow.execute_local_activity if local else workflow.execute_activity
        n = 0
        for step in range(steps):
            if patch_first:  # a command before the marker: a checkpointed step is a task each
                workflow.patched(f"step-{step}")
            n = await execute(add_one, n, start_to_close_timeout=STEP)
        return n


def _types(handle) -> list[str]:
    events = handle.fetch_history().events
    assert check_well_formed([(e["event_id"], EventType[e["event_type"]], e["attributes"]) for e in events]) == []
    return [e["event_type"] for e in events]


@pytest.fixture
def engine(bootstrap, namespace, tmp_path):
    with EngineThread.on(bootstrap, namespace, tmp_path, "hand-back", partitions=2, clock=ManualClock()), \
            Client(bootstrap, namespace) as client:
        yield client


@pytest.mark.parametrize("disabled", [False, True])
def test_checkpointed_local_steps_get_their_next_task_handed_back(engine, disabled):
    with Worker(engine, task_queue=QUEUE, workflows=[Steps], identity="checkpointing",
                checkpoint_local_activities=True, disable_workflow_task_hand_back=disabled) as worker:
        handles = [engine.start_workflow(Steps.run, args=[5, True, True], id=f"local-{disabled}-{n}",
                                         task_queue=QUEUE) for n in range(3)]
        assert [h.result(60) for h in handles] == [5, 5, 5]
        stats = worker.workflow_worker.stats
    for handle in handles:
        types = _types(handle)
        # a task per step (a patch marker and the step's), the last going with the completion
        assert types.count("MARKER_RECORDED") == 10 and types.count("WORKFLOW_TASK_COMPLETED") == 5
    # each run's first task comes through the queue; with the path on, its next four come back
    assert stats.handed_back == (0 if disabled else 12)
    assert stats.completed == 15 and stats.history_fetches == 0 and stats.journals_sent == 0


def test_checkpointed_local_steps_are_journaled_in_one_task(engine):
    with Worker(engine, task_queue=QUEUE, workflows=[Steps], identity="journaling",
                checkpoint_local_activities=True) as worker:
        handles = [engine.start_workflow(Steps.run, args=[5, True], id=f"journaled-{n}", task_queue=QUEUE)
                   for n in range(3)]
        assert [h.result(60) for h in handles] == [5, 5, 5]
        stats = worker.workflow_worker.stats
    for handle in handles:
        types = _types(handle)
        assert types.count("MARKER_RECORDED") == 5 and types.count("WORKFLOW_TASK_COMPLETED") == 1
    # four journals a run (the fifth marker goes with the answer), no task handed back
    assert (stats.journals_sent, stats.markers_journaled, stats.handed_back, stats.completed) == (12, 12, 0, 3)


@pytest.mark.parametrize("disabled", [False, True])
def test_an_eager_activitys_completion_brings_the_next_task_back_with_it(engine, disabled):
    # (Without the next task riding along with the completion, `test_workflow_task_ride_along_e2e`.)
    with Worker(engine, task_queue=QUEUE, workflows=[Steps], activities=[add_one], identity="eager",
                disable_workflow_task_hand_back=disabled, disable_workflow_task_ride_along=True) as worker:
        handles = [engine.start_workflow(Steps.run, args=[4, False], id=f"remote-{disabled}-{n}", task_queue=QUEUE)
                   for n in range(3)]
        assert [h.result(60) for h in handles] == [4, 4, 4]
        stats, activities = worker.workflow_worker.stats, worker.activity_worker.stats
    for handle in handles:
        types = _types(handle)
        assert types.count("ACTIVITY_TASK_COMPLETED") == 4 and types.count("WORKFLOW_TASK_COMPLETED") == 5
    assert activities.eager == 12
    # each run's first task comes through the queue; with the path on, the task after each
    # activity comes back with the activity's completion
    assert stats.handed_back == (0 if disabled else 12)
    assert stats.completed == 15 and stats.history_fetches == 0


_slow_started, _slow_release = threading.Event(), threading.Event()


@activity.defn
def slow_step(n: int) -> int:
    _slow_started.set()
    _slow_release.wait(60)
    return n + 1


@workflow.defn
class OneSlowStep:
    @workflow.run
    async def run(self) -> int:
        return await workflow.execute_activity(slow_step, 1, start_to_close_timeout=STEP)


def _wait_for_thread_to_end(name: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while any(t.name == name and t.is_alive() for t in threading.enumerate()):
        assert time.monotonic() < deadline, f"{name} still running"
        time.sleep(0.05)


def test_an_activity_finished_during_a_graceful_shutdown_leaves_the_next_task_to_the_queue(engine):
    """The workflow part stops at once; the activity part lets its activity finish. Its
    completion must not ask for the next task: handed back to a worker that no longer takes
    any, it would wait for its timeout (the engine's clock is manual here: forever), where
    through the queue the group's next member runs it at once."""
    leaving = Worker(engine, task_queue=QUEUE, workflows=[OneSlowStep], activities=[slow_step], identity="leaving",
                     graceful_shutdown_timeout=timedelta(seconds=60)).start()
    handle = engine.start_workflow(OneSlowStep.run, id="slow-step", task_queue=QUEUE)
    assert _slow_started.wait(30)
    stopping = threading.Thread(target=leaving.shutdown_sync)
    stopping.start()
    _wait_for_thread_to_end(f"WorkflowWorker-{QUEUE}")
    _slow_release.set()  # finished after the workflow part left
    stopping.join(60)
    assert leaving.activity_worker.stats.completed == 1
    with Worker(engine, task_queue=QUEUE, workflows=[OneSlowStep], identity="staying"):
        assert handle.result(30) == 2
    assert "WORKFLOW_TASK_TIMED_OUT" not in _types(handle)
