"""The deterministic loop: asyncio works inside workflow code, real time does not."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from streamproc import workflow
from streamproc.workflow.event_loop import WorkflowEventLoop
from tests.workflow.history import Run


@workflow.defn
class SleepsForReal:
    @workflow.run
    async def run(self) -> None:
        await asyncio.sleep(1)


@workflow.defn
class UsesAThread:
    @workflow.run
    async def run(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, print)


@pytest.mark.parametrize(("workflow_cls", "says"), [
    pytest.param(SleepsForReal, "use workflow.sleep()", id="asyncio-sleep-with-real-time"),
    pytest.param(UsesAThread, "activity", id="an-executor"),
])
def test_real_time_and_executors_fail_the_task_and_say_what_to_use(workflow_cls, says):
    outcome = Run(workflow_cls).activate()
    assert outcome.cause == "WORKFLOW_WORKER_UNHANDLED_FAILURE"
    assert outcome.failure["type"] == "NondeterministicCallError"
    assert says in outcome.failure["message"]


@workflow.defn
class PlainAsyncio:
    @workflow.run
    async def run(self) -> list:
        order: list = []

        async def child(name: str, yields: int) -> str:
            for _ in range(yields):
                await asyncio.sleep(0)
            order.append(name)
            return name

        queue: asyncio.Queue = asyncio.Queue()
        await queue.put("queued")
        done, pending = await asyncio.wait([asyncio.ensure_future(child("slow", 3)),
                                            asyncio.ensure_future(child("fast", 1))],
                                           return_when=asyncio.ALL_COMPLETED)
        event = asyncio.Event()
        asyncio.get_running_loop().call_soon(event.set)
        await event.wait()
        return order + [len(done), len(pending), await queue.get(),
                        asyncio.get_running_loop().time() == workflow.now().timestamp()]


def test_futures_tasks_wait_queues_and_events_run_without_a_clock():
    (complete,) = Run(PlainAsyncio).step()
    assert complete["result"] == '["fast","slow",2,0,"queued",true]'


def test_workflow_functions_refuse_to_run_outside_workflow_code():
    with pytest.raises(workflow.NotInWorkflowError, match="not in workflow code"):
        workflow.now()


def test_an_activation_inside_a_running_asyncio_loop_leaves_that_loop_in_place():
    async def worker_coroutine() -> tuple:
        outer = asyncio.get_running_loop()
        outcome = Run(PlainAsyncio).activate()
        return outcome.commands[0]["type"], asyncio.get_running_loop() is outer

    assert asyncio.run(worker_coroutine()) == ("COMPLETE_WORKFLOW_EXECUTION", True)


def test_the_loop_cannot_be_driven_or_stopped_by_workflow_code():
    loop = WorkflowEventLoop(owner=None, now_seconds=lambda: 0.0)
    with pytest.raises(workflow.NondeterministicCallError):
        loop.run_forever()
    with pytest.raises(workflow.NondeterministicCallError):
        loop.call_later(1, print)
    with pytest.raises(workflow.NondeterministicCallError):
        loop.call_soon_threadsafe(print)


@workflow.defn
class SleepsZero:
    @workflow.run
    async def run(self) -> str:
        await workflow.sleep(0)
        await workflow.sleep(timedelta(microseconds=10))
        return "slept"


def test_a_zero_sleep_only_yields_and_a_sub_millisecond_one_is_a_one_ms_timer():
    assert Run(SleepsZero).step() == [{"type": "START_TIMER", "timer_id": "1", "start_to_fire_timeout_ms": 1}]


def test_the_workflow_runtime_loads_no_kafka_client():
    code = ("import sys, streamproc.workflow, streamproc.workflow.replayer; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('confluent_kafka', 'rocksdict')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == "[]"
