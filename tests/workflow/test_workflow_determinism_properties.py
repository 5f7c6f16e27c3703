"""Whatever order history delivers results in, a sticky instance answers every task as a
full replay of the same history would, and the run's outcome follows only from history."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from streamproc import workflow
from tests.workflow.history import Run


@workflow.defn
class FanOut:
    @workflow.run
    async def run(self, count: int) -> list:
        async def one(i: int) -> str:
            if i % 2:
                await workflow.sleep(timedelta(seconds=i))
                return f"t{i}:{workflow.random().randint(0, 9)}"
            result = await workflow.execute_activity("work", i, start_to_close_timeout=timedelta(seconds=5))
            return f"{result}:{workflow.now().timestamp()}"

        first = await asyncio.gather(*(one(i) for i in range(count)))
        await workflow.wait_condition(lambda: len(first) == count, timeout=1)
        second = await asyncio.gather(*(one(i) for i in range(count)))
        return [first, second, str(workflow.uuid4())]


def _open_items(commands: list, still_open: list) -> None:
    for c in commands:
        if c["type"] == "SCHEDULE_ACTIVITY_TASK":
            still_open.append(("activity", c["activity_id"]))
        elif c["type"] == "START_TIMER":
            still_open.append(("timer", c["timer_id"]))
        elif c["type"] == "CANCEL_TIMER":
            still_open.remove(("timer", c["timer_id"]))


@settings(max_examples=60, deadline=None)
@given(count=st.integers(1, 4), picks=st.lists(st.integers(0, 10**6), min_size=40, max_size=40),
       per_task=st.lists(st.integers(1, 3), min_size=40, max_size=40))
def test_sticky_answers_equal_full_replays_for_any_delivery_order(count, picks, per_task):
    run = Run(FanOut, count)
    still_open: list = []
    for step in range(40):
        sticky = run.activate()
        assert sticky == run.replay()
        assert not sticky.failed, sticky.failure
        run.history.complete_task(sticky.commands)
        if sticky.commands and sticky.commands[-1]["type"] == "COMPLETE_WORKFLOW_EXECUTION":
            return
        _open_items(sticky.commands, still_open)
        # Deliver one to three of the open items, in an order hypothesis picks.
        for _ in range(min(per_task[step], len(still_open))):
            kind, ident = still_open.pop(picks[step] % len(still_open))
            run.history.advance(timedelta(milliseconds=picks[step] % 5000))
            if kind == "activity":
                run.history.activity_completed(ident, f"a{ident}")
            else:
                run.history.timer_fired(ident)
        run.history.schedule_task()
    raise AssertionError("the workflow did not complete within 40 tasks")
