"""Results answered to the client on its replies partition, end to end on a real broker.

`no_events_scan` makes reading the events topic for a result fail the test: building the
scanner raises, so a result that came by the scan could not have come at all.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

import streamproc.client.workflow_handle as workflow_handle
from streamproc import activity, workflow
from streamproc.client import Client, WorkflowContinuedAsNewError, WorkflowFailureError
from streamproc.client.errors import WorkflowNotFoundError
from streamproc.exceptions import ApplicationError
from streamproc.worker import Worker
from tests.support.countdown import Countdown
from tests.support.engines import EngineThread

pytestmark = pytest.mark.kafka

QUEUE = "results"


@activity.defn
async def greet(name: str) -> str:
    return f"Hello, {name}!"


@workflow.defn
class Greeting:
    @workflow.run
    async def run(self, name: str) -> str:
        if name == "nobody":
            raise ApplicationError("no one to greet", non_retryable=True)
        return await workflow.execute_activity(greet, name, start_to_close_timeout=timedelta(seconds=10))


@workflow.defn
class Gate:
    def __init__(self) -> None:
        self.opened_by = ""

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: bool(self.opened_by))
        return f"opened by {self.opened_by}"

    @workflow.signal
    def open(self, who: str) -> None:
        self.opened_by = who


@pytest.fixture
def engine(bootstrap, namespace, tmp_path):
    with EngineThread.on(bootstrap, namespace, tmp_path, "results") as running:
        yield running


@pytest.fixture
def no_events_scan(monkeypatch):
    class Refused:
        def __init__(self, *args, **kwargs) -> None:
            raise AssertionError("the client read the events topic for a result")

    monkeypatch.setattr(workflow_handle, "WorkflowEventScanner", Refused)


def run(bootstrap: str, namespace: str, scenario):
    """`scenario(client, other)`: two connected clients, a Worker on the first."""

    async def main():
        client = await Client.connect(bootstrap, namespace=namespace)
        other = await Client.connect(bootstrap, namespace=namespace)
        try:
            async with Worker(client, task_queue=QUEUE, workflows=[Greeting, Countdown, Gate], activities=[greet]):
                return await scenario(client, other)
        finally:
            await other.aclose()
            await client.aclose()

    return asyncio.run(main())


def test_execute_workflow_is_answered_on_the_replies_partition(engine, bootstrap, namespace, no_events_scan):
    async def scenario(client, other):
        assert await client.execute_workflow(Greeting.run, "Ada", id="greet-ada", task_queue=QUEUE,
                                             result_timeout=60) == "Hello, Ada!"
        with pytest.raises(WorkflowFailureError) as failed:
            await client.execute_workflow(Greeting.run, "nobody", id="greet-nobody", task_queue=QUEUE,
                                          result_timeout=60)
        assert "no one to greet" in str(failed.value.cause)
        # A result asked for again (the starter's waiter was used): WAIT_RESULT, answered at once.
        handle = client.get_workflow_handle("greet-ada")
        assert await handle.result(30) == "Hello, Ada!"

    run(bootstrap, namespace, scenario)


def test_another_client_waits_for_a_run_it_did_not_start(engine, bootstrap, namespace, no_events_scan):
    async def scenario(client, other):
        handle = await client.start_workflow(Gate.run, id="gate", task_queue=QUEUE)
        waiting = [asyncio.create_task(other.get_workflow_handle("gate").result(60)) for _ in range(2)]
        await asyncio.sleep(0.5)  # their WAIT_RESULTs are registered on the open run
        assert not any(w.done() for w in waiting)
        await handle.signal(Gate.open, "ops")
        assert await asyncio.gather(*waiting) == ["opened by ops"] * 2
        assert await handle.result(30) == "opened by ops"
        with pytest.raises(TimeoutError):
            await (await client.start_workflow(Gate.run, id="gate-shut", task_queue=QUEUE)).result(0.5)
        with pytest.raises(TimeoutError):
            await other.get_workflow_handle("gate-shut").result(0.5)

    run(bootstrap, namespace, scenario)


def test_continue_as_new_is_followed_to_the_last_run(engine, bootstrap, namespace, no_events_scan):
    async def scenario(client, other):
        handle = await client.start_workflow(Countdown.run, 2, id="countdown", task_queue=QUEUE)
        result = await handle.result(60)
        last_run = result.removeprefix("done in run ")
        assert last_run != handle.run_id
        # Another client, from the first run: the engine follows the chain in its state.
        assert await other.get_workflow_handle("countdown", run_id=handle.run_id).result(30) == result
        with pytest.raises(WorkflowContinuedAsNewError):
            await other.get_workflow_handle("countdown", run_id=handle.run_id).result(30, follow_runs=False)
        # One that waits from before the first close hears each close and follows them.
        waiting = await client.start_workflow(Gate.run, id="gate-then-count", task_queue=QUEUE)
        follower = asyncio.create_task(other.get_workflow_handle("gate-then-count").result(60))
        await asyncio.sleep(0.5)
        await waiting.signal(Gate.open, "first")
        assert await follower == "opened by first"

    run(bootstrap, namespace, scenario)


def test_the_events_scan_remains_for_what_the_engine_does_not_know(engine, bootstrap, namespace):
    async def scenario(client, other):
        with pytest.raises(WorkflowNotFoundError):
            await other.get_workflow_handle("never-started").result(10)

    run(bootstrap, namespace, scenario)
