"""A cancel request reaches the run method as asyncio.CancelledError at its current await."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from streamproc import workflow
from streamproc.activity.payloads import decode
from tests.workflow.history import Run

MINUTE = timedelta(minutes=1)


@workflow.defn
class CleansUp:
    @workflow.run
    async def run(self) -> str:
        try:
            await workflow.execute_activity("ship", start_to_close_timeout=MINUTE)
        except asyncio.CancelledError:
            await workflow.execute_activity("refund", start_to_close_timeout=MINUTE)
            return "refunded"
        return "shipped"


def test_cancelled_run_cancels_its_activity_runs_cleanup_and_completes():
    run = Run(CleansUp)
    run.step()
    run.history.cancel_requested()
    run.history.schedule_task()
    cancel, refund = run.step()
    assert cancel == {"type": "REQUEST_CANCEL_ACTIVITY_TASK", "scheduled_event_id": 5}
    assert (refund["activity_id"], refund["activity_type"]) == ("2", "refund")
    run.history.activity_canceled("1")
    run.history.activity_completed("2", None)
    run.history.schedule_task()
    assert run.step() == [{"type": "COMPLETE_WORKFLOW_EXECUTION", "result": '"refunded"'}]
    assert run.replay().commands == []


@workflow.defn
class Propagates:
    @workflow.run
    async def run(self) -> None:
        await workflow.sleep(timedelta(days=1))


def test_cancellation_that_propagates_cancels_the_timer_and_the_workflow():
    run = Run(Propagates)
    run.step()
    run.history.cancel_requested()
    run.history.schedule_task()
    assert run.step() == [{"type": "CANCEL_TIMER", "timer_id": "1"},
                          {"type": "CANCEL_WORKFLOW_EXECUTION", "details": None}]
    assert run.history.events[-1]["event_type"] == "WORKFLOW_EXECUTION_CANCELED"


def test_cancel_requested_before_the_first_task_cancels_the_run_at_once():
    run = Run(Propagates)
    run.history.events.pop()  # the first task is scheduled after the cancel request
    run.history.cancel_requested()
    run.history.schedule_task()
    run.instance = type(run.instance)(run.definition, run.history.events)
    assert run.activate().commands == [{"type": "CANCEL_WORKFLOW_EXECUTION", "details": None}]


@workflow.defn
class WaitsForTheCancel:
    @workflow.run
    async def run(self) -> list:
        try:
            await workflow.execute_activity(
                "ship", start_to_close_timeout=MINUTE,
                cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED)
        except workflow.ActivityError as err:
            return [err.message, type(err.cause).__name__, err.retry_state.name]
        return []


def test_wait_cancellation_completed_waits_for_the_activitys_canceled_event():
    run = Run(WaitsForTheCancel)
    run.step()
    run.history.cancel_requested()
    run.history.schedule_task()
    assert run.step() == [{"type": "REQUEST_CANCEL_ACTIVITY_TASK", "scheduled_event_id": 5}]
    run.history.activity_canceled("1")
    run.history.schedule_task()
    (complete,) = run.step()
    assert decode(complete["result"]) == ["Activity task canceled", "CancelledError", "CANCEL_REQUESTED"]


@workflow.defn
class CancelsItsOwnActivity:
    @workflow.run
    async def run(self) -> str:
        dropped = workflow.start_activity("never_sent", start_to_close_timeout=MINUTE)
        dropped.cancel()
        sent = workflow.start_activity("slow", start_to_close_timeout=MINUTE)
        await workflow.sleep(5)
        sent.cancel()
        try:
            await sent
        except asyncio.CancelledError:
            return "cancelled"
        return "finished"


def test_a_handle_cancelled_in_the_task_that_scheduled_it_is_never_sent():
    run = Run(CancelsItsOwnActivity)
    commands = run.step()
    assert [(c["type"], c.get("activity_type")) for c in commands] == \
        [("SCHEDULE_ACTIVITY_TASK", "slow"), ("START_TIMER", None)]
    assert (commands[0]["activity_id"], commands[1]["timer_id"]) == ("2", "3")
    run.history.timer_fired("3")
    run.history.schedule_task()
    assert run.step() == [{"type": "REQUEST_CANCEL_ACTIVITY_TASK", "scheduled_event_id": 5},
                          {"type": "COMPLETE_WORKFLOW_EXECUTION", "result": '"cancelled"'}]
