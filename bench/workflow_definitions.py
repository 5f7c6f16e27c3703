"""The workflows and the activity the workflow benchmarks run (the worker imports this module).

Trivial on purpose: the benchmarks measure the engine, the protocol and the SDK, not
user code. The activity returns its argument; timeouts are long, so nothing times out.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from streamproc import activity, workflow

ACTIVITY_TIMEOUT = timedelta(seconds=60)


@activity.defn(name="bench_echo")
def echo(value: int) -> int:
    return value


@workflow.defn(name="BenchOneActivity")
class OneActivity:
    @workflow.run
    async def run(self, value: int) -> int:
        return await workflow.execute_activity(echo, value, start_to_close_timeout=ACTIVITY_TIMEOUT)


@workflow.defn(name="BenchSequentialActivities")
class SequentialActivities:
    @workflow.run
    async def run(self, steps: int) -> int:
        total = 0
        for step in range(steps):
            total += await workflow.execute_activity(echo, step, start_to_close_timeout=ACTIVITY_TIMEOUT)
        return total


@workflow.defn(name="BenchOneLocalActivity")
class OneLocalActivity:
    @workflow.run
    async def run(self, value: int) -> int:
        return await workflow.execute_local_activity(echo, value, start_to_close_timeout=ACTIVITY_TIMEOUT)


@workflow.defn(name="BenchSequentialLocalActivities")
class SequentialLocalActivities:
    """Temporal's mode: the steps run one after the other inside one workflow task, and
    their markers are written when it completes."""

    @workflow.run
    async def run(self, steps: int) -> int:
        total = 0
        for step in range(steps):
            total += await workflow.execute_local_activity(echo, step, start_to_close_timeout=ACTIVITY_TIMEOUT)
        return total


@workflow.defn(name="BenchOneTimer")
class OneTimer:
    @workflow.run
    async def run(self, sleep_ms: int) -> int:
        await workflow.sleep(timedelta(milliseconds=sleep_ms))
        return sleep_ms


@workflow.defn(name="BenchSignalSink")
class SignalSink:
    """Counts `ping` signals until `stop`; `count` answers how many it got."""

    def __init__(self) -> None:
        self.received = 0
        self.stopped = False

    @workflow.run
    async def run(self, _: int) -> int:
        await workflow.wait_condition(lambda: self.stopped)
        return self.received

    @workflow.signal
    def ping(self, value: str) -> None:
        self.received += 1

    @workflow.signal
    def stop(self) -> None:
        self.stopped = True

    @workflow.query
    def count(self) -> int:
        return self.received


@workflow.defn(name="BenchLongHistory")
class LongHistory:
    """`steps` 1 ms sleeps: five history events each (a long history for replays)."""

    def __init__(self) -> None:
        self.steps = 0

    @workflow.run
    async def run(self, steps: int) -> int:
        for _ in range(steps):
            await workflow.sleep(timedelta(milliseconds=1))
            self.steps += 1
        return steps

    @workflow.query
    def count(self) -> int:
        return self.steps


@workflow.defn(name="BenchChild")
class Child:
    @workflow.run
    async def run(self, n: int) -> int:
        return n


@workflow.defn(name="BenchParent")
class Parent:
    """Runs `children` children at once (ids `<parent id>-<n>`) and sums their results."""

    @workflow.run
    async def run(self, children: int) -> int:
        parent_id = workflow.info().workflow_id
        results = await asyncio.gather(*(workflow.execute_child_workflow(Child.run, n, id=f"{parent_id}-{n}")
                                         for n in range(children)))
        return sum(results)


WORKFLOWS = [OneActivity, SequentialActivities, OneLocalActivity, SequentialLocalActivities, OneTimer, SignalSink, LongHistory, Child, Parent]
ACTIVITIES = [echo]
