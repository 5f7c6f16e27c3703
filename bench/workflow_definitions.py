"""The workflows and the activity the workflow benchmarks run (the worker imports this module).

Trivial on purpose: the benchmarks measure the engine, the protocol and the SDK, not
user code. The activity returns its argument; timeouts are long, so nothing times out.
"""

from __future__ import annotations

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


@workflow.defn(name="BenchOneTimer")
class OneTimer:
    @workflow.run
    async def run(self, sleep_ms: int) -> int:
        await workflow.sleep(timedelta(milliseconds=sleep_ms))
        return sleep_ms


WORKFLOWS = [OneActivity, SequentialActivities, OneTimer]
ACTIVITIES = [echo]
