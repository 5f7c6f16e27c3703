"""A delayed start and update handles by id end to end on a real broker, written as a
Temporal user writes them: ``start_workflow(..., start_delay=)``,
``handle.get_update_handle(id)`` for an update another process sent."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from datetime import timedelta

import pytest

from streamproc import workflow
from streamproc.client import (
    Client,
    SyncClient,
    WorkflowUpdateFailedError,
    WorkflowQueryFailedError,
    WorkflowUpdateNotFoundError,
    WorkflowUpdateStage,
)
from streamproc.exceptions import ApplicationError
from streamproc.semantics.workflow_ids import WorkflowExecutionStatus
from streamproc.settings import Settings
from streamproc.worker import Worker
from tests.support.engines import EngineThread

pytestmark = pytest.mark.kafka

QUEUE = "gates"


@workflow.defn
class Gate:
    """Lets through whoever asks (an update) once the gate is open (a signal)."""

    def __init__(self) -> None:
        self.opened = False
        self.done = False
        self.passed: list[str] = []

    @workflow.run
    async def run(self) -> list[str]:
        await workflow.wait_condition(lambda: self.done)
        return self.passed

    @workflow.signal
    def open(self) -> None:
        self.opened = True

    @workflow.signal
    def finish(self) -> None:
        self.done = True

    @workflow.query
    def passers(self) -> list[str]:
        return self.passed

    @workflow.update
    async def pass_gate(self, who: str) -> str:
        await workflow.wait_condition(lambda: self.opened)
        if who == "mallory":
            raise ApplicationError("mallory may not pass", type="NotAllowed")
        self.passed.append(who)
        return f"{who} passed"


@pytest.fixture
def engine(bootstrap, namespace, tmp_path):
    settings = Settings(bootstrap=bootstrap, namespace=namespace, partitions=2, state_dir=tmp_path,
                        engine_id="delays")
    with EngineThread(settings, idle_poll_ms=10) as running:
        yield running


def on_worker(bootstrap: str, namespace: str, scenario):
    async def main():
        client = await Client.connect(bootstrap, namespace=namespace)
        try:
            async with Worker(client, task_queue=QUEUE, workflows=[Gate]):
                return await scenario(client)
        finally:
            await client.aclose()

    return asyncio.run(main())


def test_a_delayed_start_runs_after_the_delay_and_an_update_does_not_wait_for_it(engine, bootstrap, namespace):
    async def scenario(client: Client):
        sent = time.time()
        handle = await client.start_workflow(Gate.run, id="gate-delayed", task_queue=QUEUE,
                                             start_delay=timedelta(seconds=2))
        during = await handle.describe()
        with pytest.raises(WorkflowQueryFailedError, match=r"^Workflow task is not scheduled yet\.$"):
            await handle.query(Gate.passers)  # no code has run yet: Temporal refuses too
        await handle.signal(Gate.open)  # recorded; it does not end the wait
        await handle.signal(Gate.finish)
        result = await handle.result(timeout=30)
        done = time.time()
        events = (await handle.fetch_history()).events
        # An update gives a run that waits its first task at once, as on a Temporal server.
        later = await client.start_workflow(Gate.run, id="gate-later", task_queue=QUEUE,
                                            start_delay=timedelta(hours=1))
        await later.signal(Gate.open)
        asked = time.monotonic()
        updated = await later.execute_update(Gate.pass_gate, "ann")
        update_took = time.monotonic() - asked
        await later.terminate("enough")
        return sent, during, result, done, events, updated, update_took

    sent, during, result, done, events, updated, update_took = on_worker(bootstrap, namespace, scenario)
    assert during.status is WorkflowExecutionStatus.RUNNING and during.history_length == 1
    assert during.execution_time_ms - during.start_time_ms == 2000 and during.pending_workflow_task is None
    assert during.execution_time - during.start_time == timedelta(seconds=2) and during.close_time is None
    assert result == [] and done - sent >= 2
    started, scheduled = events[0], events[3]
    assert started["attributes"]["first_workflow_task_backoff_ms"] == 2000
    assert [e["event_type"] for e in events[:4]] == ["WORKFLOW_EXECUTION_STARTED", "WORKFLOW_EXECUTION_SIGNALED",
                                                     "WORKFLOW_EXECUTION_SIGNALED", "WORKFLOW_TASK_SCHEDULED"]
    assert scheduled["event_time_ms"] - started["event_time_ms"] >= 2000
    assert updated == "ann passed" and update_took < 30


SEND_UPDATE = '''
import asyncio, sys
from streamproc.client import Client, WorkflowUpdateStage

async def main():
    client = await Client.connect()
    handle = client.get_workflow_handle(sys.argv[1])
    await handle.start_update("pass_gate", sys.argv[2], id=sys.argv[3], wait_for_stage=WorkflowUpdateStage.ACCEPTED)
    await client.aclose()

asyncio.run(main())
'''


def _send_update_from_another_process(bootstrap: str, namespace: str, tmp_path, workflow_id: str, who: str,
                                      update_id: str) -> None:
    program = tmp_path / "send_update.py"
    program.write_text(SEND_UPDATE)
    env = {**os.environ, "STREAMPROC_BOOTSTRAP": bootstrap, "STREAMPROC_NAMESPACE": namespace}
    done = subprocess.run([sys.executable, str(program), workflow_id, who, update_id], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_an_update_handle_by_id_waits_for_an_update_another_process_sent(engine, bootstrap, namespace, tmp_path):
    async def scenario(client: Client):
        handle = await client.start_workflow(Gate.run, id="gate-1", task_queue=QUEUE)
        await asyncio.to_thread(_send_update_from_another_process, bootstrap, namespace, tmp_path,
                                "gate-1", "bob", "u-bob")
        await asyncio.to_thread(_send_update_from_another_process, bootstrap, namespace, tmp_path,
                                "gate-1", "mallory", "u-mallory")
        waiting = asyncio.ensure_future(client.get_workflow_handle("gate-1").get_update_handle("u-bob").result())
        typed = asyncio.ensure_future(handle.get_update_handle_for(Gate.pass_gate, "u-bob").result())
        refused = asyncio.ensure_future(handle.get_update_handle("u-mallory").result())
        await asyncio.sleep(1)
        still_waiting = not waiting.done()
        await handle.signal(Gate.open)
        bob, bob_typed = await waiting, await typed
        with pytest.raises(WorkflowUpdateFailedError) as failed:
            await refused
        with pytest.raises(WorkflowUpdateNotFoundError, match='update "u-nobody" not found') as unknown:
            await handle.get_update_handle("u-nobody").result()
        await handle.signal(Gate.finish)
        await handle.result(timeout=30)
        # The run closed: the outcome is still there for whoever asks.
        after_close = await client.get_workflow_handle("gate-1").get_update_handle("u-bob").result(timeout=30)
        return still_waiting, bob, bob_typed, failed.value, unknown.value, after_close

    still_waiting, bob, bob_typed, failed, unknown, after_close = on_worker(bootstrap, namespace, scenario)
    assert still_waiting and bob == bob_typed == after_close == "bob passed"
    assert failed.cause.type == "NotAllowed" and failed.cause.message == "mallory may not pass"
    assert unknown.rejection_type == "NOT_FOUND"


def test_an_update_whose_handler_outlives_its_rpc_timeout_is_still_waited_for(engine, bootstrap, namespace):
    async def scenario(client: Client):
        handle = await client.start_workflow(Gate.run, id="gate-slow", task_queue=QUEUE)

        async def open_later():
            await asyncio.sleep(3)
            await handle.signal(Gate.open)

        opener = asyncio.ensure_future(open_later())
        result = await handle.execute_update(Gate.pass_gate, "dan", rpc_timeout=1)  # Temporal's: per request
        await opener
        await handle.terminate("enough")
        return result

    assert on_worker(bootstrap, namespace, scenario) == "dan passed"


def test_the_sync_client_takes_update_handles_by_id_too(engine, bootstrap, namespace):
    with SyncClient(bootstrap, namespace=namespace) as client, Worker(client, task_queue=QUEUE, workflows=[Gate]):
        handle = client.start_workflow(Gate.run, id="gate-sync", task_queue=QUEUE)
        handle.signal(Gate.open)
        started = handle.start_update(Gate.pass_gate, "cy", id="u-cy", wait_for_stage=WorkflowUpdateStage.ACCEPTED)
        by_id = client.get_workflow_handle("gate-sync").get_update_handle("u-cy")
        assert by_id.result(timeout=30) == started.result(timeout=30) == "cy passed"
        assert (by_id.workflow_id, by_id.workflow_run_id, started.workflow_run_id) == (
            "gate-sync", None, handle.run_id)
        handle.terminate("enough")
