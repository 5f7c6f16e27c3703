"""The issue's sample: reserve, sleep 24 hours, charge; driven to completion by feeding
the instance the events an engine would write, then replayed from its full history."""

from __future__ import annotations

from datetime import timedelta

from streamproc import workflow
from streamproc.activity.payloads import decode
from streamproc.workflow.replayer import Replayer
from tests.workflow.history import Run

TEN_SECONDS = timedelta(seconds=10)


@workflow.defn
class OrderWorkflow:
    @workflow.run
    async def run(self, order_id: str) -> dict:
        reservation = await workflow.execute_activity("reserve", order_id, start_to_close_timeout=TEN_SECONDS)
        await workflow.sleep(timedelta(hours=24))
        receipt = await workflow.execute_activity("charge", args=[order_id, reservation],
                                                  start_to_close_timeout=TEN_SECONDS)
        return {"reservation": reservation, "receipt": receipt, "charged_at": workflow.now().isoformat()}


def test_order_workflow_runs_to_completion_on_the_events_an_engine_writes():
    run = Run(OrderWorkflow, "order-7")
    h = run.history

    (reserve,) = run.step()
    assert reserve == {
        "type": "SCHEDULE_ACTIVITY_TASK", "activity_id": "1", "activity_type": "reserve",
        "task_queue": "orders", "input": '["order-7"]', "schedule_to_close_timeout_ms": 0,
        "schedule_to_start_timeout_ms": 0, "start_to_close_timeout_ms": 10_000,
        "heartbeat_timeout_ms": 0, "retry_policy": None}

    h.advance(timedelta(seconds=2))
    h.activity_completed("1", "R-1")
    h.schedule_task()
    assert run.step() == [{"type": "START_TIMER", "timer_id": "2", "start_to_fire_timeout_ms": 86_400_000}]

    h.advance(timedelta(hours=24))
    h.timer_fired("2")
    h.schedule_task()
    (charge,) = run.step()
    assert (charge["activity_id"], charge["activity_type"], decode(charge["input"])) == \
        ("3", "charge", ["order-7", "R-1"])

    h.advance(timedelta(seconds=1))
    h.activity_completed("3", {"paid": 42})
    h.schedule_task()
    (complete,) = run.step()
    assert complete["type"] == "COMPLETE_WORKFLOW_EXECUTION"
    assert decode(complete["result"]) == {"reservation": "R-1", "receipt": {"paid": 42},
                                          "charged_at": "2026-09-22T14:13:23+00:00"}
    assert h.events[-1]["event_type"] == "WORKFLOW_EXECUTION_COMPLETED"

    # The closed history replays without error, and no task is left to answer.
    assert Replayer(workflows=[OrderWorkflow]).replay(h.events).commands == []
