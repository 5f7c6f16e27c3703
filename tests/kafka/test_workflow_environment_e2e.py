"""`streamproc.testing.WorkflowEnvironment` on a real broker, written as a Temporal user
writes a test: ``await WorkflowEnvironment.start_time_skipping()``, ``async with Worker(env.client, ...)``."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from datetime import datetime, timedelta

import pytest

from streamproc import activity, workflow
from streamproc.client import (Schedule, ScheduleActionStartWorkflow, ScheduleIntervalSpec, ScheduleSpec,
                               WorkflowFailureError)
from streamproc.common import RetryPolicy
from streamproc.exceptions import ApplicationError
from streamproc.testing import WorkflowEnvironment
from streamproc.worker import Worker

pytestmark = pytest.mark.kafka

QUEUE = "testenv"
#: Attempts of `flaky_charge` that fail: with a day of backoff after each, a week of retries.
FAILING_ATTEMPTS = 7


@pytest.fixture(autouse=True)
def configured_broker(bootstrap, monkeypatch):
    """The environment finds the broker as a user's test would: STREAMPROC_BOOTSTRAP."""
    monkeypatch.setenv("STREAMPROC_BOOTSTRAP", bootstrap)


@activity.defn
async def flaky_charge(amount: int) -> str:
    attempt = activity.info().attempt
    if attempt <= FAILING_ATTEMPTS:
        raise ApplicationError(f"card declined (attempt {attempt})")
    return f"charged {amount} at attempt {attempt}"


@activity.defn
async def slow_step(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "activity"


@workflow.defn
class Subscription:
    @workflow.run
    async def run(self, amount: int) -> list[str]:
        subscribed = workflow.now()
        await workflow.sleep(timedelta(days=30))
        renewed = workflow.now()
        receipt = await workflow.execute_activity(
            flaky_charge, amount, start_to_close_timeout=timedelta(seconds=10),
            retry_policy=RetryPolicy(initial_interval=timedelta(days=1), backoff_coefficient=1.0,
                                     maximum_attempts=FAILING_ATTEMPTS + 3))
        return [subscribed.isoformat(), renewed.isoformat(), workflow.now().isoformat(), receipt]


@workflow.defn
class Reminder:
    @workflow.run
    async def run(self, hours: float) -> str:
        await workflow.sleep(timedelta(hours=hours))
        return workflow.now().isoformat()


@contextlib.asynccontextmanager
async def reminders() -> AsyncIterator[WorkflowEnvironment]:
    """A time-skipping environment with a worker of `Reminder` on it."""
    async with await WorkflowEnvironment.start_time_skipping() as env:
        async with Worker(env.client, task_queue=QUEUE, workflows=[Reminder]):
            yield env


@workflow.defn
class Race:
    """An activity racing a one-hour timer."""

    @workflow.run
    async def run(self, activity_seconds: float) -> str:
        step = workflow.start_activity(slow_step, activity_seconds, start_to_close_timeout=timedelta(seconds=30))
        try:
            await workflow.wait_condition(step.done, timeout=timedelta(hours=1))
        except asyncio.TimeoutError:
            return "timer"
        return await step


@workflow.defn
class Parent:
    """Children that sleep 3, 10 and 20 days (on other partitions), then a day of its own."""

    @workflow.run
    async def run(self) -> list[str]:
        began = workflow.now()
        woke = await asyncio.gather(*[workflow.execute_child_workflow(Reminder.run, days * 24, id=f"child-{days}")
                                      for days in (3, 10, 20)])
        await workflow.sleep(timedelta(days=1))
        return [began.isoformat(), *woke, workflow.now().isoformat()]


@workflow.defn
class Forever:
    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: False)


def test_a_30_day_sleep_then_a_week_of_activity_retries_take_seconds():
    async def main():
        async with await WorkflowEnvironment.start_time_skipping() as env:
            assert env.supports_time_skipping
            async with Worker(env.client, task_queue=QUEUE, workflows=[Subscription], activities=[flaky_charge]):
                began = time.monotonic()
                result = await env.client.execute_workflow(Subscription.run, 25, id="sub-1", task_queue=QUEUE)
                return result, time.monotonic() - began, await env.get_current_time()

    (subscribed, renewed, charged, receipt), wall_s, env_now = asyncio.run(main())
    subscribed, renewed, charged = map(datetime.fromisoformat, (subscribed, renewed, charged))
    assert receipt == f"charged 25 at attempt {FAILING_ATTEMPTS + 1}"
    assert timedelta(days=30) <= renewed - subscribed < timedelta(days=30, minutes=1)
    # One day of backoff after each failed attempt, as the retry policy says.
    assert timedelta(days=FAILING_ATTEMPTS) <= charged - renewed < timedelta(days=FAILING_ATTEMPTS, minutes=1)
    assert env_now >= charged
    assert wall_s < 10, f"took {wall_s:.1f} s of wall time"


def test_children_on_other_partitions_skip_in_order_too():
    async def main():
        async with await WorkflowEnvironment.start_time_skipping(partitions=4) as env:
            async with Worker(env.client, task_queue=QUEUE, workflows=[Parent, Reminder]):
                return await env.client.execute_workflow(Parent.run, id="parent-1", task_queue=QUEUE)

    began, *woke, ended = map(datetime.fromisoformat, asyncio.run(main()))
    for days, at in zip((3, 10, 20), woke):
        assert timedelta(days=days) <= at - began < timedelta(days=days, minutes=1)
    assert timedelta(days=21) <= ended - began < timedelta(days=21, minutes=1)


def test_an_execution_timeout_and_a_schedules_actions_are_skipped_to():
    async def main():
        async with await WorkflowEnvironment.start_time_skipping() as env:
            async with Worker(env.client, task_queue=QUEUE, workflows=[Forever, Reminder]):
                before = await env.get_current_time()
                with pytest.raises(WorkflowFailureError) as failure:
                    await env.client.execute_workflow(Forever.run, id="forever-1", task_queue=QUEUE,
                                                      execution_timeout=timedelta(days=2))
                timed_out_after = await env.get_current_time() - before
                schedule = await env.client.create_schedule("daily", Schedule(
                    action=ScheduleActionStartWorkflow(Reminder.run, 0, id="daily-reminder", task_queue=QUEUE),
                    spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(days=1))])))
                await env.sleep(timedelta(days=3))
                actions = (await schedule.describe()).info.num_actions
                await schedule.delete()
                return failure.value.cause, timed_out_after, actions

    cause, timed_out_after, actions = asyncio.run(main())
    assert "timed out" in str(cause)
    assert timedelta(days=2) <= timed_out_after < timedelta(days=2, minutes=1)
    assert actions == 3  # one a day, at midnight UTC (epoch aligned)


def test_a_delayed_start_is_skipped_to():
    async def main():
        async with reminders() as env:
            before, began = await env.get_current_time(), time.monotonic()
            woke = await env.client.execute_workflow(Reminder.run, 1, id="delayed-1", task_queue=QUEUE,
                                                     start_delay=timedelta(days=7))
            return before, datetime.fromisoformat(woke), time.monotonic() - began

    before, woke, wall_s = asyncio.run(main())
    assert timedelta(days=7, hours=1) <= woke - before < timedelta(days=7, hours=1, minutes=1)
    assert wall_s < 10, f"took {wall_s:.1f} s of wall time"


def test_env_sleep_skips_time_and_fires_the_timers_on_the_way():
    async def main():
        async with reminders() as env:
            before = await env.get_current_time()
            handle = await env.client.start_workflow(Reminder.run, 3, id="remind-1", task_queue=QUEUE)
            began = time.monotonic()
            await env.sleep(timedelta(hours=5))
            slept_wall_s = time.monotonic() - began
            after = await env.get_current_time()
            with env.auto_time_skipping_disabled():  # the timer fired during the sleep already
                fired_at = datetime.fromisoformat(await handle.result(timeout=10))
            return before, after, fired_at, slept_wall_s

    before, after, fired_at, slept_wall_s = asyncio.run(main())
    assert timedelta(hours=5) <= after - before < timedelta(hours=5, minutes=1)
    assert before + timedelta(hours=3) <= fired_at < before + timedelta(hours=3, minutes=1)
    assert slept_wall_s < 5


@pytest.mark.parametrize("eager", [True, False], ids=["eager-activity", "activity-through-its-queue"])
def test_a_timer_does_not_fire_while_the_activity_it_races_runs(eager):
    async def main():
        async with await WorkflowEnvironment.start_time_skipping() as env:
            async with Worker(env.client, task_queue=QUEUE, workflows=[Race], activities=[slow_step],
                              disable_eager_activity_execution=not eager):
                before = await env.get_current_time()
                winner = await env.client.execute_workflow(Race.run, 1.0, id="race-1", task_queue=QUEUE)
                return winner, await env.get_current_time() - before

    winner, elapsed = asyncio.run(main())
    assert winner == "activity"  # time stands still for skipping while an activity attempt runs
    assert elapsed < timedelta(minutes=1)


def test_auto_time_skipping_disabled_keeps_real_time_and_local_environments_never_skip():
    async def main():
        async with reminders() as env:
            before = await env.get_current_time()
            handle = await env.client.start_workflow(Reminder.run, 1, id="remind-2", task_queue=QUEUE)
            with env.auto_time_skipping_disabled():
                with pytest.raises(TimeoutError):
                    await handle.result(timeout=1)
            real_only = await env.get_current_time() - before
            fired_at = datetime.fromisoformat(await handle.result(timeout=10))  # skipping again
        async with await WorkflowEnvironment.start_local() as local:
            assert not local.supports_time_skipping
            async with Worker(local.client, task_queue=QUEUE, workflows=[Reminder]):
                local_before = await local.get_current_time()
                await local.sleep(0.2)
                wrapped = WorkflowEnvironment.from_client(local.client)  # shutdown leaves the client alone
                assert not wrapped.supports_time_skipping
                await wrapped.shutdown()
                done = await wrapped.client.execute_workflow(Reminder.run, 0.2 / 3600, id="remind-3",
                                                           task_queue=QUEUE)
                local_elapsed = await local.get_current_time() - local_before
        return before, real_only, fired_at, datetime.fromisoformat(done) - local_before, local_elapsed

    before, real_only, fired_at, local_fired_after, local_elapsed = asyncio.run(main())
    assert timedelta(seconds=1) <= real_only < timedelta(seconds=30)
    assert fired_at >= before + timedelta(hours=1)
    assert timedelta(seconds=0.4) <= local_fired_after and local_elapsed < timedelta(seconds=30)
