"""Asynchronous activity completion end to end on a real broker, written as a Temporal user
writes it: the activity hands its task token on and calls ``activity.raise_complete_async()``;
the test, playing whoever finishes the work, answers through
``client.get_async_activity_handle(...)``.

The engine runs with a manual clock: the heartbeat and start-to-close timeouts the tests
depend on fire when a test moves the clock, never on the machine's timing.
"""

from __future__ import annotations

import asyncio
import queue
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest

from streamproc import activity, workflow
from streamproc.client import ActivityClient, ActivityNotFoundError, AsyncActivityCancelledError, Client, SyncClient
from streamproc.clock import ManualClock
from streamproc.common import RetryPolicy
from streamproc.exceptions import ActivityError, ApplicationError, TimeoutError
from streamproc.worker import Worker
from tests.support.engines import EngineThread

pytestmark = pytest.mark.kafka

QUEUE = "async-completion"
#: The task token (and info) of each attempt of `wait_for_approval`, in the order they ran.
HANDED_ON: queue.Queue[activity.Info] = queue.Queue()


@activity.defn
async def wait_for_approval(order_id: str) -> str:
    HANDED_ON.put(activity.info())
    activity.raise_complete_async()


@activity.defn
def wait_for_approval_sync(order_id: str) -> str:
    HANDED_ON.put(activity.info())
    activity.raise_complete_async()


@workflow.defn
class Approval:
    """Returns what the approval activity returned, or how it failed."""

    @workflow.run
    async def run(self, order_id: str, heartbeat_s: float = 0, start_to_close_s: float = 60,
                  attempts: int = 0, sync: bool = False) -> str:
        try:
            return await workflow.execute_activity(
                wait_for_approval_sync if sync else wait_for_approval, order_id, activity_id=f"approve-{order_id}",
                start_to_close_timeout=timedelta(seconds=start_to_close_s),
                heartbeat_timeout=timedelta(seconds=heartbeat_s) if heartbeat_s else None,
                retry_policy=RetryPolicy(maximum_attempts=attempts))
        except ActivityError as error:
            return f"{type(error.cause).__name__}: {error.cause.message}"


@workflow.defn
class PatientApproval:
    """Waits for the activity to acknowledge a cancellation (the run stays open meanwhile)."""

    @workflow.run
    async def run(self, order_id: str) -> str:
        return await workflow.execute_activity(
            wait_for_approval, order_id, start_to_close_timeout=timedelta(seconds=60),
            heartbeat_timeout=timedelta(seconds=30),
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED)


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
def engine(bootstrap, namespace, tmp_path, clock):
    with EngineThread.on(bootstrap, namespace, tmp_path, "async-completion", clock=clock) as running:
        yield running


def scenario(bootstrap: str, namespace: str, body):
    """Run `body(client)` with a connected client and a Worker for the workflows and activities."""
    while not HANDED_ON.empty():
        HANDED_ON.get()

    async def main(executor: ThreadPoolExecutor):
        client = await Client.connect(bootstrap, namespace=namespace)
        try:
            async with Worker(client, task_queue=QUEUE, workflows=[Approval, PatientApproval],
                              activities=[wait_for_approval, wait_for_approval_sync], activity_executor=executor):
                return await body(client)
        finally:
            await client.aclose()

    with ThreadPoolExecutor(max_workers=2) as executor:
        return asyncio.run(main(executor))


async def start_approval(client: Client, n: int, *options):
    """Start `Approval` of order o-`n` as workflow approval-`n`; `options`: its other arguments."""
    return await client.start_workflow(Approval.run, args=[f"o-{n}", *options], id=f"approval-{n}", task_queue=QUEUE)


async def handed_on() -> activity.Info:
    """The info of the next attempt that raised complete-async (it has started for the engine)."""
    return await asyncio.to_thread(HANDED_ON.get, timeout=30)


def test_complete_by_task_token(engine, bootstrap, namespace):
    async def body(client: Client):
        handle = await start_approval(client, 1)
        info = await handed_on()
        assert isinstance(info.task_token, bytes) and info.task_token
        await client.get_async_activity_handle(task_token=info.task_token).complete("approved by Ann")
        return await handle.result(timeout=30)

    assert scenario(bootstrap, namespace, body) == "approved by Ann"


def test_complete_by_workflow_and_activity_ids_from_a_sync_activity(engine, bootstrap, namespace):
    async def body(client: Client):
        handle = await start_approval(client, 2, 0, 60, 0, True)
        info = await handed_on()
        assert (info.workflow_id, info.workflow_run_id, info.workflow_type) == ("approval-2", handle.result_run_id,
                                                                                "Approval")
        activity_handle = client.get_async_activity_handle(workflow_id=info.workflow_id, run_id=info.workflow_run_id,
                                                           activity_id=info.activity_id)
        await activity_handle.heartbeat("looking")
        await activity_handle.complete("approved by id")
        return await handle.result(timeout=30)

    assert scenario(bootstrap, namespace, body) == "approved by id"


def test_fail_reaches_the_workflow_as_an_activity_error(engine, bootstrap, namespace):
    async def body(client: Client):
        handle = await start_approval(client, 3)
        info = await handed_on()
        await client.get_async_activity_handle(task_token=info.task_token).fail(
            ApplicationError("card declined", type="Declined", non_retryable=True))
        return await handle.result(timeout=30)

    assert scenario(bootstrap, namespace, body) == "ApplicationError: card declined"


def test_a_failed_attempt_is_retried_with_its_last_heartbeat_details(engine, bootstrap, namespace, clock):
    async def body(client: Client):
        handle = await start_approval(client, 4, 0, 60, 2)
        first = await handed_on()
        await client.get_async_activity_handle(task_token=first.task_token).fail(
            RuntimeError("approver away"), last_heartbeat_details=["asked Bob"])
        clock.advance(timedelta(seconds=1.5))  # past the retry's backoff (the default policy: 1 s)
        second = await handed_on()
        await client.get_async_activity_handle(task_token=second.task_token).complete("approved on retry")
        return first, second, await handle.result(timeout=30)

    first, second, result = scenario(bootstrap, namespace, body)
    assert (first.attempt, second.attempt, result) == (1, 2, "approved on retry")
    assert list(second.heartbeat_details) == ["asked Bob"] and second.task_token != first.task_token


def test_heartbeats_keep_it_alive_past_its_heartbeat_timeout(engine, bootstrap, namespace, clock):
    async def body(client: Client):
        handle = await start_approval(client, 5, 2)
        activity_handle = client.get_async_activity_handle(task_token=(await handed_on()).task_token)
        for step in range(4):  # 6 s in all, three times the heartbeat timeout
            clock.advance(timedelta(seconds=1.5))
            await activity_handle.heartbeat(step)
        await activity_handle.complete("approved after a while")
        return await handle.result(timeout=30)

    assert scenario(bootstrap, namespace, body) == "approved after a while"


def test_answering_an_attempt_that_timed_out_is_refused(engine, bootstrap, namespace, clock):
    async def body(client: Client):
        handle = await start_approval(client, 6, 0, 2, 1)
        activity_handle = client.get_async_activity_handle(task_token=(await handed_on()).task_token)
        clock.advance(timedelta(seconds=3))  # past start-to-close; one attempt only
        result = await handle.result(timeout=30)
        with pytest.raises(ActivityNotFoundError, match="activity already timed out") as refused:
            await activity_handle.complete("too late")
        by_ids = client.get_async_activity_handle(workflow_id="approval-6", run_id=None, activity_id="approve-o-6")
        with pytest.raises(ActivityNotFoundError):
            await by_ids.heartbeat()
        return result, refused.value

    result, refused = scenario(bootstrap, namespace, body)
    assert result == f"{TimeoutError.__name__}: activity StartToClose timeout"
    assert refused.rejection_type == "NOT_FOUND"


def test_a_cancellation_request_is_learnt_from_a_heartbeat(engine, bootstrap, namespace):
    async def body(client: Client):
        handle = await client.start_workflow(PatientApproval.run, "o-7", id="approval-7", task_queue=QUEUE)
        activity_handle = client.get_async_activity_handle(task_token=(await handed_on()).task_token)
        await handle.cancel()
        for _ in range(100):  # the workflow's cancellation reaches the activity through its run
            try:
                await activity_handle.heartbeat()
            except AsyncActivityCancelledError:
                await activity_handle.report_cancellation("stopped asking")
                return "cancelled"
            await asyncio.sleep(0.1)
        return "never learnt"

    assert scenario(bootstrap, namespace, body) == "cancelled"


def test_the_sync_client_completes_too(engine, bootstrap, namespace):
    async def body(client: Client):
        handle = await start_approval(client, 8)
        token = (await handed_on()).task_token

        def complete_from_blocking_code() -> None:
            with SyncClient(client.bootstrap, namespace) as sync_client:
                sync_client.get_async_activity_handle(task_token=token).complete("approved, blocking")

        await asyncio.to_thread(complete_from_blocking_code)
        return await handle.result(timeout=30)

    assert scenario(bootstrap, namespace, body) == "approved, blocking"



def test_an_activity_a_client_scheduled_completes_by_task_token_too(engine, bootstrap, namespace):
    async def body(client: Client):
        with ActivityClient(client) as activities:
            handle = await activities.schedule_activity(wait_for_approval, "o-9", task_queue=QUEUE,
                                                        start_to_close_timeout=timedelta(seconds=60))
            info = await handed_on()
            assert info.workflow_id is None
            await client.get_async_activity_handle(task_token=info.task_token).complete("approved, standalone")
            return await handle.result(timeout=30)

    assert scenario(bootstrap, namespace, body) == "approved, standalone"
