"""The asyncio client and worker end to end on a real broker, written as a Temporal user
writes them: ``await Client.connect()``, ``async with Worker(...)``, awaited handle calls."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest

from streamproc import activity, workflow
from streamproc.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleSpec,
    SyncClient,
    WorkflowFailureError,
)
from streamproc.client.errors import CancelledError, InvalidArgument, TerminatedError
from streamproc.semantics.workflow_ids import WorkflowExecutionStatus
from streamproc.worker import Worker
from tests.support.engines import EngineThread

pytestmark = pytest.mark.kafka

QUEUE = "async-client"


@workflow.defn
class Counter:
    def __init__(self) -> None:
        self.count = 0
        self.done = False

    @workflow.run
    async def run(self, start: int) -> int:
        self.count += start
        await workflow.wait_condition(lambda: self.done)
        return self.count

    @workflow.signal
    def add(self, n: int) -> None:
        self.count += n

    @workflow.signal
    def finish(self) -> None:
        self.done = True

    @workflow.query
    def value(self) -> int:
        return self.count

    @workflow.update
    async def add_and_get(self, n: int) -> int:
        self.count += n
        return self.count


@activity.defn
def shout(name: str) -> str:
    return f"{name.upper()} from {threading.current_thread().name.split('_')[0]}"


#: The threads `greet` ran on: the caller's event loop's, as in Temporal.
GREET_THREADS: list[str] = []


@activity.defn
async def greet(name: str) -> str:
    GREET_THREADS.append(threading.current_thread().name)
    return f"Hello, {name}!"


@workflow.defn
class Hello:
    @workflow.run
    async def run(self, name: str) -> list[str]:
        return [await workflow.execute_activity(greet, name, start_to_close_timeout=timedelta(seconds=10)),
                await workflow.execute_activity(shout, name, start_to_close_timeout=timedelta(seconds=10))]


@pytest.fixture
def engine(bootstrap, namespace, tmp_path):
    with EngineThread.on(bootstrap, namespace, tmp_path, "async-client") as running:
        yield running


def on_worker(bootstrap: str, namespace: str, scenario, **worker_options):
    """Run `scenario(client)` with a connected client and a Worker for Counter and Hello."""

    async def main():
        client = await Client.connect(bootstrap, namespace=namespace)
        try:
            async with Worker(client, task_queue=QUEUE, workflows=[Counter, Hello], **worker_options):
                return await scenario(client)
        finally:
            await client.aclose()

    return asyncio.run(main())


# -- the issue's example ---------------------------------------------------------------------

HELLO_EXAMPLE = '''
import asyncio
from dataclasses import dataclass
from datetime import timedelta
from streamproc import activity, workflow
from streamproc.client import Client
from streamproc.worker import Worker
from streamproc.common import RetryPolicy
from streamproc.exceptions import ApplicationError, ActivityError

@dataclass
class Greeting:
    greeting: str
    name: str

@activity.defn
async def compose(g: Greeting) -> str:
    activity.logger.info("composing %s", g)           # logger with activity context
    return f"{g.greeting}, {g.name}!"

@workflow.defn
class GreetingWorkflow:
    @workflow.run
    async def run(self, name: str) -> str:
        workflow.logger.info("running for %s", name)   # not repeated on replay
        return await workflow.execute_activity(compose, Greeting("Hello", name),
                                               start_to_close_timeout=timedelta(seconds=10))

async def main() -> None:
    client = await Client.connect()                     # STREAMPROC_BOOTSTRAP, or Client.connect("host:9092")
    async with Worker(client, task_queue="hello", workflows=[GreetingWorkflow], activities=[compose]):
        print(await client.execute_workflow(GreetingWorkflow.run, "World", id="hello-1", task_queue="hello"))

asyncio.run(main())
'''


def _typed_sdk_present() -> bool:
    """The example also needs typed conversion, loggers and `streamproc.common` (another part of the issue)."""
    try:
        import streamproc.common  # noqa: F401
    except ImportError:
        return False
    return hasattr(activity, "logger") and hasattr(workflow, "logger")


@pytest.mark.skipif(not _typed_sdk_present(), reason="needs typed conversion, loggers and streamproc.common")
def test_the_issues_hello_example_runs_as_written(engine, bootstrap, namespace, tmp_path):
    program = tmp_path / "hello.py"
    program.write_text(HELLO_EXAMPLE)
    env = {**os.environ, "STREAMPROC_BOOTSTRAP": bootstrap, "STREAMPROC_NAMESPACE": namespace}
    done = subprocess.run([sys.executable, str(program)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Hello, World!" in done.stdout.splitlines()  # among the worker's log lines


def test_hello_with_the_asyncio_client_an_async_activity_on_the_loop_and_a_plain_one_in_the_executor(
        engine, bootstrap, namespace):
    async def scenario(client: Client):
        return await client.execute_workflow(Hello.run, "World", id="hello-1", task_queue=QUEUE)

    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="user-pool") as executor:
        result = on_worker(bootstrap, namespace, scenario, activities=[greet, shout], activity_executor=executor)
    assert result == ["Hello, World!", "WORLD from user-pool"]
    assert GREET_THREADS == [threading.main_thread().name]  # asyncio.run's loop, in this thread


# -- one test per handle method ----------------------------------------------------------------

def test_result_and_signal(engine, bootstrap, namespace):
    async def scenario(client: Client):
        handle = await client.start_workflow(Counter.run, 1, id="c-signal", task_queue=QUEUE)
        await handle.signal(Counter.add, 2)
        await handle.signal("finish")
        return await handle.result(timeout=30)

    assert on_worker(bootstrap, namespace, scenario) == 3


def test_query(engine, bootstrap, namespace):
    async def scenario(client: Client):
        handle = await client.start_workflow(Counter.run, 5, id="c-query", task_queue=QUEUE)
        value = await handle.query(Counter.value, rpc_timeout=timedelta(seconds=30))  # Temporal's type
        await handle.terminate("done")
        return value

    assert on_worker(bootstrap, namespace, scenario) == 5


def test_execute_update(engine, bootstrap, namespace):
    async def scenario(client: Client):
        handle = await client.start_workflow(Counter.run, 5, id="c-update", task_queue=QUEUE)
        updated = await handle.execute_update(Counter.add_and_get, 10)
        await handle.signal(Counter.finish)
        return updated, await handle.result(timeout=30)

    assert on_worker(bootstrap, namespace, scenario) == (15, 15)


def test_describe(engine, bootstrap, namespace):
    async def scenario(client: Client):
        handle = await client.start_workflow(Counter.run, 0, id="c-describe", task_queue=QUEUE,
                                             memo={"owner": "ann"})
        description = await handle.describe()
        await handle.terminate()
        return description

    description = on_worker(bootstrap, namespace, scenario)
    assert description.status is WorkflowExecutionStatus.RUNNING
    assert description.memo == {"owner": "ann"}


def test_cancel(engine, bootstrap, namespace):
    async def scenario(client: Client):
        handle = await client.start_workflow(Counter.run, 0, id="c-cancel", task_queue=QUEUE)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result(timeout=30)
        return failed.value.cause

    assert isinstance(on_worker(bootstrap, namespace, scenario), CancelledError)


def test_terminate(engine, bootstrap, namespace):
    async def scenario(client: Client):
        handle = await client.start_workflow(Counter.run, 0, id="c-terminate", task_queue=QUEUE)
        await handle.terminate("enough")
        with pytest.raises(WorkflowFailureError) as failed:
            await client.get_workflow_handle_for(Counter.run, "c-terminate").result(timeout=30)
        return failed.value.cause

    cause = on_worker(bootstrap, namespace, scenario)
    assert isinstance(cause, TerminatedError) and "enough" in str(cause)


def test_fetch_history_and_list_workflows(engine, bootstrap, namespace):
    async def scenario(client: Client):
        handle = await client.start_workflow(Counter.run, 0, id="c-history", task_queue=QUEUE)
        await handle.signal(Counter.finish)
        await handle.result(timeout=30)
        history = await client.get_workflow_handle("c-history").fetch_history()
        one_by_one = [e async for e in handle.fetch_history_events()]
        listed = [run async for run in client.list_workflows()]
        assert (await client.count_workflows()).count == 1
        return history, one_by_one, listed

    history, one_by_one, listed = on_worker(bootstrap, namespace, scenario)
    assert one_by_one == history.events
    types = [e["event_type"] for e in history.events]
    assert types[0] == "WORKFLOW_EXECUTION_STARTED" and types[-1] == "WORKFLOW_EXECUTION_COMPLETED"
    assert [(r.id, r.status) for r in listed] == [("c-history", WorkflowExecutionStatus.COMPLETED)]
    assert listed[0].start_time <= listed[0].close_time


def test_schedules(engine, bootstrap, namespace):
    async def scenario(client: Client):
        handle = await client.create_schedule("nightly", Schedule(
            action=ScheduleActionStartWorkflow(Counter.run, 0, id="nightly-run", task_queue=QUEUE),
            spec=ScheduleSpec(cron_expressions=["0 2 * * *"])))
        await handle.pause(note="maintenance")
        description = await handle.describe()
        listed = [s.id async for s in await client.list_schedules()]
        await handle.delete()
        return description, listed

    description, listed = on_worker(bootstrap, namespace, scenario)
    assert description.schedule.state.paused and description.schedule.state.note == "maintenance"
    assert listed == ["nightly"]


# -- the worker -----------------------------------------------------------------------------

def test_shutdown_lets_the_running_activity_finish_and_report(engine, bootstrap, namespace):
    release = threading.Event()
    started = threading.Event()

    @activity.defn(name="slow_double")
    async def slow_double(n: int) -> int:
        started.set()
        await asyncio.to_thread(release.wait, 30)
        return 2 * n

    @workflow.defn(name="Doubler")
    class Doubler:
        @workflow.run
        async def run(self, n: int) -> int:
            return await workflow.execute_activity(slow_double, n, start_to_close_timeout=timedelta(seconds=60))

    async def main():
        client = await Client.connect(bootstrap, namespace=namespace)
        activities = Worker(client, task_queue="drain", activities=[slow_double],
                            graceful_shutdown_timeout=timedelta(seconds=30))
        async with Worker(client, task_queue="drain", workflows=[Doubler]):
            await activities.__aenter__()
            handle = await client.start_workflow(Doubler.run, 21, id="drain-1", task_queue="drain")
            await asyncio.to_thread(started.wait, 30)
            shutting_down = asyncio.create_task(activities.shutdown())
            await asyncio.sleep(0.3)
            waited_for_the_activity = not shutting_down.done()
            release.set()
            await shutting_down
            result = await handle.result(timeout=30)
        await client.aclose()
        return waited_for_the_activity, activities.activity_worker.stats.completed, result

    assert asyncio.run(main()) == (True, 1, 42)


def test_a_plain_activity_needs_an_executor_with_the_asyncio_client():
    client = Client("127.0.0.1:1", "unit", log_level=0)
    try:
        with pytest.raises(ValueError, match=r"activities \['shout'\] are not async def: give the Worker an "
                                             r"activity_executor"):
            Worker(client, task_queue="q", activities=[greet, shout])
        with ThreadPoolExecutor(1) as executor:
            Worker(client, task_queue="q", activities=[greet, shout], activity_executor=executor)
        sync = SyncClient(client)  # the blocking face keeps running plain activities on its own threads
        Worker(sync, task_queue="q", activities=[shout])
        sync._loop.close()
    finally:
        client._producer.purge()


def test_temporal_options_we_lack_raise_not_implemented_naming_them_and_connect_names_the_problem():
    async def scenario():
        client = Client("127.0.0.1:1", "unit", log_level=0)
        with pytest.raises(NotImplementedError, match=r"priority is not implemented .*task priorities"):
            await client.start_workflow(Counter.run, 1, id="x", task_queue="q", priority=object())
        with pytest.raises(InvalidArgument, match="CronSchedule and WorkflowStartDelay may not be used together"):
            await client.start_workflow(Counter.run, 1, id="x", task_queue="q", start_delay=timedelta(0),
                                        cron_schedule="@hourly")  # implemented: checked before sending
        with pytest.raises(InvalidArgument, match="An invalid WorkflowStartDelaySeconds is set on request. cause: "
                                                  "negative duration"):
            await client.start_workflow(Counter.run, 1, id="x", task_queue="q", start_delay=timedelta(seconds=-1))
        with pytest.raises(NotImplementedError, match="request_eager_start is not implemented"):
            await client.execute_workflow(Counter.run, 1, id="x", task_queue="q", request_eager_start=True)
        with pytest.raises(TypeError, match="unexpected keyword argument 'taskqueue'"):  # a typo stays a TypeError
            await client.start_workflow(Counter.run, 1, id="x", task_queue="q", taskqueue="q")
        with pytest.raises(NotImplementedError, match="query is not implemented .*visibility queries"):
            [run async for run in client.list_workflows("WorkflowType='Counter'")]
        with pytest.raises(ValueError, match="not a streamproc task token"):  # implemented: a token is checked
            client.get_async_activity_handle(task_token=b"")
        with pytest.raises(NotImplementedError, match="interceptors is not implemented by streamproc's Worker"):
            Worker(client, task_queue="q", workflows=[Counter], interceptors=[object()])
        with pytest.raises(NotImplementedError, match=r"tls is not implemented .*STREAMPROC_KAFKA_"):
            await Client.connect("127.0.0.1:1", tls=True)
        client._producer.purge()
        with pytest.raises(RuntimeError, match="not found within 1"):
            await Client.connect("127.0.0.1:1", namespace="unit", rpc_timeout=1, log_level=0)

    asyncio.run(scenario())
