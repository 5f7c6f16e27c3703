"""When the workflow worker's threads wake, on a real broker. The thread that owns the task
queue's consumer blocks in its poll, the thread of the handed-back tasks blocks until the
replies listener puts one there: neither slices its wait to look at the other source.
Counted, not timed (the machine may be busy): the polls of the task queue and the waits
for handed-back tasks, over an idle stretch and over a run."""

from __future__ import annotations


import time
from datetime import timedelta

import pytest
from confluent_kafka import Producer

from streamproc import activity, workflow
from streamproc.client import Client
from streamproc.clock import ManualClock
from streamproc.worker import Worker
from streamproc.worker import workflow_worker
from streamproc.worker.handed_tasks import HandedTasks
from tests.support.engines import EngineThread

pytestmark = pytest.mark.kafka

QUEUE = "wakeups"


@activity.defn
def add_one(n: int) -> int:
    return n + 1


@workflow.defn
class LocalSteps:
    """Checkpointed local steps, a workflow task each: a patch marker before each step's
    marker is a command they must follow, so they are not journaled (`local_activity_task`)
    and each step answers its task, whose next one comes back to the worker."""

    @workflow.run
    async def run(self, steps: int) -> int:
        n = 0
        for step in range(steps):
            workflow.patched(f"step-{step}")
            n = await workflow.execute_local_activity(add_one, n, start_to_close_timeout=timedelta(seconds=10))
        return n


@pytest.fixture
def engine(bootstrap, namespace, tmp_path):
    with EngineThread.on(bootstrap, namespace, tmp_path, "wakeups", partitions=2, clock=ManualClock()), \
            Client(bootstrap, namespace) as client:
        yield client


@pytest.fixture
def wakeups(monkeypatch):
    """Counts the polls of the task queue and the waits for handed-back tasks (each wait
    returns only with tasks, or at the end)."""
    counts = {"polls": 0, "handed_waits": 0}
    consume, wait = workflow_worker.consume_available, HandedTasks.wait_for_tasks

    def counted_consume(*args, **kwargs):
        counts["polls"] += 1
        return consume(*args, **kwargs)

    def counted_wait(self):
        counts["handed_waits"] += 1
        return wait(self)
    monkeypatch.setattr(workflow_worker, "consume_available", counted_consume)
    monkeypatch.setattr(HandedTasks, "wait_for_tasks", counted_wait)
    return counts


def _steps(engine, worker, workflow_id: str, steps: int):
    handle = engine.start_workflow(LocalSteps.run, steps, id=workflow_id, task_queue=QUEUE)
    assert handle.result(60) == steps
    return worker.workflow_worker.stats


def test_a_worker_waiting_for_a_handed_back_task_wakes_only_when_one_comes(engine, wakeups):
    """With an ask open and no task coming back, the task queue's thread polls at its idle
    pace (POLL_S) and the handed-back tasks' thread does not wake at all; a loop that
    alternated 2 ms waits for the hand-back with polls of the queue woke ~300 times a second."""
    with Worker(engine, task_queue=QUEUE, workflows=[LocalSteps], identity="waiting",
                checkpoint_local_activities=True) as worker:
        handed = worker.workflow_worker.handed
        polls_before, began = wakeups["polls"], time.monotonic()
        while time.monotonic() - began < 2:
            handed.listen()  # an answer that asked: the engine made no task, nothing comes back
            time.sleep(0.25)
        idle_s = time.monotonic() - began
        polls = wakeups["polls"] - polls_before
        assert polls <= idle_s / workflow_worker.POLL_S + 2, f"{polls} polls in {idle_s:.1f} s"
        assert wakeups["handed_waits"] == 1  # the first wait, still blocked

        stats = _steps(engine, worker, "three-steps", 3)
        # each run's first task comes through the queue, the next two come back, each
        # waking the thread once
        assert stats.handed_back == 2 and stats.completed == 3
        assert wakeups["handed_waits"] == 1 + 2


def test_either_source_is_taken_while_the_other_blocks_with_no_timeout(engine, wakeups, monkeypatch, bootstrap):
    """The task queue's poll waits an hour: the run's handed-back tasks are taken all the
    same (the poll never returns meanwhile), as is its first task from the queue while
    the other thread blocks for handed-back tasks."""
    monkeypatch.setattr(workflow_worker, "POLL_S", 3600.0)
    with Worker(engine, task_queue=QUEUE, workflows=[LocalSteps], identity="blocked",
                checkpoint_local_activities=True) as worker:
        stats = _steps(engine, worker, "four-steps", 4)
        assert stats.handed_back == 3 and stats.completed == 4
        # one poll returned with the first task, the next one is still waiting
        assert wakeups["polls"] == 2
        assert wakeups["handed_waits"] == 1 + 3
        # The poll returns when a record comes: one that is no task, skipped, after the
        # stop is asked for, so that the worker leaves within the test.
        worker.workflow_worker.stop()
        producer = Producer({"bootstrap.servers": bootstrap})
        producer.produce(engine.topics.workflow_tasks(QUEUE), b"not a task", partition=0)
        producer.flush(10)
    assert stats.skipped == 1
