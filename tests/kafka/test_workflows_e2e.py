"""Workflows end to end on a real broker: engine (manual clock), Worker and client.

The engine runs in a thread with a `ManualClock`, so a 24 h `workflow.sleep` passes by
moving the clock once its timer is on the log. Nothing here waits for wall-clock time:
each step waits for the event that shows the previous one happened.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from streamproc import activity, workflow
from streamproc.client import Client, WorkflowAlreadyStartedError, WorkflowContinuedAsNewError, WorkflowFailureError
from streamproc.client.errors import CancelledError, TerminatedError
from streamproc.client.workflow_events import WorkflowEvent
from streamproc.clock import ManualClock
from streamproc.engine.processing import Limits
from streamproc.semantics.workflow_events import EventType
from streamproc.semantics.workflow_history import check_well_formed
from streamproc.semantics.workflow_ids import WorkflowExecutionStatus, WorkflowIdConflictPolicy
from streamproc.worker import Worker
from tests.support.countdown import Countdown
from tests.support.engines import EngineThread
from tests.support.polling import wait_for_event, wait_until

pytestmark = pytest.mark.kafka

QUEUE = "orders"
ACTIVITY_TIMEOUT = timedelta(seconds=30)


@activity.defn
def reserve(order_id: str) -> str:
    return f"reservation-{order_id}"


@activity.defn
def charge(order_id: str, reservation: str) -> dict:
    return {"order": order_id, "reservation": reservation, "charged": True}


@activity.defn
def release(order_id: str) -> str:
    return f"released-{order_id}"


@workflow.defn
class OrderWorkflow:
    """The issue's sample: an activity, a day's sleep, an activity."""

    @workflow.run
    async def run(self, order_id: str) -> dict:
        reservation = await workflow.execute_activity(reserve, order_id, start_to_close_timeout=ACTIVITY_TIMEOUT)
        await workflow.sleep(timedelta(hours=24))
        return await workflow.execute_activity(charge, args=[order_id, reservation],
                                               start_to_close_timeout=ACTIVITY_TIMEOUT)


@workflow.defn
class CancellableOrder:
    """Waits an hour; a cancel request releases the reservation, then ends as canceled."""

    @workflow.run
    async def run(self, order_id: str) -> str:
        try:
            await workflow.sleep(timedelta(hours=1))
        except asyncio.CancelledError:
            await workflow.execute_activity(release, order_id, start_to_close_timeout=ACTIVITY_TIMEOUT)
            raise
        return "not cancelled"


@workflow.defn
class ManySteps:
    """A long history: `steps` activities one after the other."""

    @workflow.run
    async def run(self, steps: int) -> int:
        for n in range(steps):
            await workflow.execute_activity(reserve, f"{n:04d}-" + "x" * 200,
                                            start_to_close_timeout=ACTIVITY_TIMEOUT)
        return steps


class Env:
    def __init__(self, engine, clock: ManualClock, client: Client) -> None:
        self.engine, self.clock, self.client = engine, clock, client

    def start(self, workflow_run, arg, workflow_id: str, **options):
        return self.client.start_workflow(workflow_run, arg, id=workflow_id, task_queue=QUEUE, **options)

    def wait_for_event(self, workflow_id: str, event_type: str, timeout: float = 60) -> WorkflowEvent:
        return wait_for_event(self.client, workflow_id, event_type, timeout)


@pytest.fixture
def env(bootstrap, namespace, tmp_path):
    clock = ManualClock()
    # Small pages, so that a history of a few dozen events already travels in several.
    limits = Limits(max_history_page_bytes=4 * 1024)
    with EngineThread.on(bootstrap, namespace, tmp_path, "workflows", clock=clock, limits=limits) as engine, \
            Client(bootstrap, namespace) as client, \
            worker(client) as running:
        e = Env(engine, clock, client)
        e.worker = running
        yield e


def worker(client: Client, identity: str = "e2e-worker") -> Worker:
    return Worker(client, task_queue=QUEUE, workflows=[OrderWorkflow, CancellableOrder, ManySteps, Countdown],
                  activities=[reserve, charge, release], identity=identity)


def history_of(handle) -> list[tuple[int, EventType, dict]]:
    return [(e["event_id"], EventType[e["event_type"]], e["attributes"]) for e in handle.fetch_history().events]


def test_the_order_workflow_sleeps_a_day_and_completes_with_a_well_formed_history(env):
    handle = env.start(OrderWorkflow.run, "order-1", "order-1")
    assert handle.run_id and handle.id == "order-1"
    timer = env.wait_for_event("order-1", "TIMER_STARTED")
    assert timer.attributes["start_to_fire_timeout_ms"] == 24 * 3600 * 1000

    env.clock.advance(timedelta(hours=24, milliseconds=1))
    assert handle.result(60) == {"order": "order-1", "reservation": "reservation-order-1", "charged": True}

    history = history_of(handle)
    assert check_well_formed(history) == []
    types = [t.name for _, t, _ in history]
    assert types.count("ACTIVITY_TASK_COMPLETED") == 2 and types.count("TIMER_FIRED") == 1
    assert types[0] == "WORKFLOW_EXECUTION_STARTED" and types[-1] == "WORKFLOW_EXECUTION_COMPLETED"
    completed_tasks = [a for _, t, a in history if t is EventType.WORKFLOW_TASK_COMPLETED]
    assert len(completed_tasks) == 4 and all(a["identity"] == "e2e-worker" for a in completed_tasks)
    # the engine's clock, not the wall clock: the fire is a day after the timer's start
    fired = next(e for e in handle.fetch_history().events if e["event_type"] == "TIMER_FIRED")
    started = next(e for e in handle.fetch_history().events if e["event_type"] == "TIMER_STARTED")
    assert fired["event_time_ms"] - started["event_time_ms"] >= 24 * 3600 * 1000
    # another worker's handle, by id only, reads the same result
    assert env.client.get_workflow_handle("order-1").result(60)["charged"] is True
    assert env.worker.workflow_worker.stats.failed == 0
    stats = env.worker.workflow_worker.stats
    # no replay between tasks (a task that rode with its activity's completion needs none)
    assert stats.cache_hits + stats.rode_along >= 2
    # both activities ran eagerly: started for this worker when scheduled, no task queue trip
    assert env.worker.activity_worker.stats.eager == 2 and env.worker.activity_worker.stats.completed == 2


def test_without_eager_execution_activities_go_through_the_task_queue(env):
    with Worker(env.client, task_queue="orders-no-eager", workflows=[OrderWorkflow], activities=[reserve, charge],
                disable_eager_activity_execution=True) as plain:
        handle = env.client.start_workflow(OrderWorkflow.run, "order-plain", id="order-plain",
                                           task_queue="orders-no-eager")
        env.wait_for_event("order-plain", "TIMER_STARTED")
        env.clock.advance(timedelta(hours=24, milliseconds=1))
        assert handle.result(60)["charged"] is True
        assert plain.activity_worker.stats.eager == 0 and plain.activity_worker.stats.started == 2
    assert check_well_formed(history_of(handle)) == []


def test_starting_a_running_workflow_id_again_is_refused_with_temporals_message(env):
    first = env.start(CancellableOrder.run, "order-2", "order-2")
    with pytest.raises(WorkflowAlreadyStartedError) as raised:
        env.start(CancellableOrder.run, "order-2", "order-2")
    assert str(raised.value) == (f"Workflow execution is already running. WorkflowId: order-2, "
                                 f"RunId: {first.run_id}.")
    assert raised.value.run_id == first.run_id and raised.value.workflow_type == "CancellableOrder"
    # USE_EXISTING answers with the running run instead
    same = env.start(CancellableOrder.run, "order-2", "order-2",
                     id_conflict_policy=WorkflowIdConflictPolicy.USE_EXISTING)
    assert same.run_id == first.run_id
    first.terminate("done with it")


def _end_a_sleeping_order(env, workflow_id: str, end) -> tuple:
    """Start a CancellableOrder, `end(handle)` it once it sleeps; returns the handle and the
    WorkflowFailureError its result raised."""
    handle = env.start(CancellableOrder.run, workflow_id, workflow_id)
    env.wait_for_event(workflow_id, "TIMER_STARTED")
    end(handle)
    with pytest.raises(WorkflowFailureError) as raised:
        handle.result(60)
    return handle, raised.value


def test_a_cancel_the_workflow_handles_runs_its_cleanup_then_ends_canceled(env):
    handle, error = _end_a_sleeping_order(env, "order-3", lambda h: h.cancel("customer changed their mind"))
    assert isinstance(error.cause, CancelledError)
    history = history_of(handle)
    assert check_well_formed(history) == []
    types = [t.name for _, t, _ in history]
    assert "WORKFLOW_EXECUTION_CANCEL_REQUESTED" in types and types[-1] == "WORKFLOW_EXECUTION_CANCELED"
    cleanup = [a for _, t, a in history if t is EventType.ACTIVITY_TASK_COMPLETED]
    assert [a["result"] for a in cleanup] == ['"released-order-3"']


def test_terminate_ends_the_run_at_once_without_running_its_code(env):
    handle, error = _end_a_sleeping_order(env, "order-4", lambda h: h.terminate("by the test"))
    assert isinstance(error.cause, TerminatedError) and error.cause.message == "by the test"
    history = history_of(handle)
    assert check_well_formed(history) == []
    assert history[-1][1] is EventType.WORKFLOW_EXECUTION_TERMINATED
    assert not any(t is EventType.ACTIVITY_TASK_SCHEDULED for _, t, _ in history)


def test_describe_shows_a_running_then_a_completed_run(env):
    handle = env.start(OrderWorkflow.run, "order-5", "order-5")
    env.wait_for_event("order-5", "TIMER_STARTED")
    running = handle.describe()
    assert running.status is WorkflowExecutionStatus.RUNNING
    assert (running.workflow_type, running.task_queue, running.run_id) == ("OrderWorkflow", QUEUE, handle.run_id)
    # one sequence for activities and timers: reserve is "1", the day's sleep "2"
    assert [t["timer_id"] for t in running.pending_timers] == ["2"]
    assert running.pending_activities == []

    env.clock.advance(timedelta(hours=24, milliseconds=1))
    handle.result(60)
    closed = handle.describe()
    assert closed.status is WorkflowExecutionStatus.COMPLETED
    assert closed.history_length == len(handle.fetch_history().events)


def test_a_long_history_reaches_the_client_in_several_pages_and_the_worker_step_by_step(env):
    steps = 40
    handle = env.start(ManySteps.run, steps, "many-steps")
    assert handle.result(120) == steps
    events = handle.fetch_history().events
    assert [e["event_id"] for e in events] == list(range(1, len(events) + 1))
    assert sum(e["event_type"] == "ACTIVITY_TASK_COMPLETED" for e in events) == steps
    assert len(events) > 6 * steps
    assert check_well_formed([(e["event_id"], EventType[e["event_type"]], e["attributes"]) for e in events]) == []
    pages = env.client.workflow_requests.pages({"workflow_id": "many-steps", "run_id": ""}, 30)
    assert len(pages) > 3 and [p.value["page"] for p in pages] == list(range(len(pages)))
    # The worker had the run cached: each task carried only the events of one step, so
    # none needed more than one record however long the history grew.
    stats = env.worker.workflow_worker.stats
    assert stats.paged == 0 and stats.history_fetches == 0 and stats.cache_hits + stats.rode_along >= steps


def test_result_follows_continue_as_new_to_the_last_run(env):
    handle = env.start(Countdown.run, 2, "countdown")
    result = handle.result(60)
    first = handle.fetch_history().events
    assert first[-1]["event_type"] == "WORKFLOW_EXECUTION_CONTINUED_AS_NEW"
    second_run = first[-1]["attributes"]["new_execution_run_id"]
    assert second_run != handle.run_id
    last = env.client.get_workflow_handle("countdown")  # the current run: the third
    assert result == f"done in run {last.describe().run_id}" and last.describe().run_id != second_run
    with pytest.raises(WorkflowContinuedAsNewError):
        handle.result(60, follow_runs=False)


def test_a_workflow_type_no_worker_knows_fails_its_task_with_a_clear_failure(env):
    handle = env.start("NoSuchWorkflow", None, "unknown-type")
    failed = env.wait_for_event("unknown-type", "WORKFLOW_TASK_FAILED")
    assert failed.attributes["cause"] == "WORKFLOW_WORKER_UNHANDLED_FAILURE"
    assert failed.attributes["failure"]["message"] == (
        "Workflow class NoSuchWorkflow is not registered on this worker, available workflows: "
        "CancellableOrder, Countdown, ManySteps, OrderWorkflow")
    assert handle.describe().status is WorkflowExecutionStatus.RUNNING  # a task failure never fails the run
    handle.terminate("no worker for it")


def test_a_worker_that_stops_mid_run_loses_nothing_another_replays_the_run(env, namespace):
    handle = env.start(OrderWorkflow.run, "order-6", "order-6")
    env.wait_for_event("order-6", "TIMER_STARTED")
    env.worker.shutdown()  # leaves both groups; its sticky cache goes with it

    with worker(env.client, identity="second-worker") as second:
        env.clock.advance(timedelta(hours=24, milliseconds=1))
        assert handle.result(60)["charged"] is True
        stats = second.workflow_worker.stats
        # The verdict on an answer that rode along reaches the worker after the close may reach us.
        wait_until(lambda: stats.ride_along_sent == stats.rode_along + stats.ride_along_refused, 30,
                   "the ride-along verdict")
        # the task after the timer carried only what followed the first worker's answer:
        # the second worker fetched the whole history, replayed it, then used its cache (or
        # answered the last task with the activity's completion)
        assert stats.completed + stats.rode_along == 2 and stats.cache_hits + stats.rode_along == 1
        assert stats.cache_misses == 0
        assert stats.history_fetches == 1
    history = history_of(handle)
    assert check_well_formed(history) == []
    identities = [a["identity"] for _, t, a in history if t is EventType.WORKFLOW_TASK_COMPLETED]
    assert identities == ["e2e-worker", "e2e-worker", "second-worker", "second-worker"]
