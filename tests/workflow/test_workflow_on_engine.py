"""The runtime against the real engine processors (no broker): the commands it issues are
the ones the engine accepts, and the histories the engine writes replay cleanly."""

from __future__ import annotations

import asyncio
from datetime import timedelta


from streamproc import workflow
from streamproc.activity.payloads import decode
from streamproc.protocol.records import Record
from streamproc.workflow.definition import WorkflowDefinition
from streamproc.workflow.instance import WorkflowInstance
from streamproc.workflow.replayer import Replayer
from tests.engine.workflow_driver import WorkflowDriver

HOUR_MS = 3_600_000


@workflow.defn(name="Order")
class Order:
    @workflow.run
    async def run(self, order_id: str) -> list:
        reservation = await workflow.execute_activity("reserve", order_id,
                                                      start_to_close_timeout=timedelta(seconds=10))
        try:
            await workflow.sleep(timedelta(hours=24))
        except asyncio.CancelledError:
            await workflow.execute_activity("release", reservation, start_to_close_timeout=timedelta(seconds=10))
            raise
        receipt = await workflow.execute_activity("charge", reservation, start_to_close_timeout=timedelta(seconds=10))
        return [reservation, receipt]


class StickyWorker:
    """Answers the engine's workflow tasks with one cached instance per run, checking each
    answer against a full replay of the same history."""

    def __init__(self, driver: WorkflowDriver, run_key: int) -> None:
        self.d = driver
        self.key = run_key
        self.instance: WorkflowInstance | None = None
        self.seen = 0

    def answer(self) -> list:
        history = self.d.history(self.key)
        definition = WorkflowDefinition.of(Order)
        if self.instance is None:
            self.instance = WorkflowInstance(definition, history)
        else:
            self.instance.extend(history[self.seen:])
        self.seen = len(history)
        outcome = self.instance.activate()
        assert outcome == WorkflowInstance(definition, history).activate()
        assert not outcome.failed, outcome.failure
        self.d.complete(self.key, outcome.commands)
        return outcome.commands

    def run_activity(self, result: str) -> None:
        task = self.d.activity_tasks()[-1]
        self.d.h.send(Record.command("ACTIVITY_TASK", "START", {"attempt": 1, "identity": "act"}, key=task.key))
        self.d.h.send(Record.command("ACTIVITY_TASK", "COMPLETE", {"attempt": 1, "result": f'"{result}"'},
                                    key=task.key))


def test_order_workflow_completes_on_the_engine_and_its_history_replays(d):
    key, _ = d.start(input='["o-1"]')
    worker = StickyWorker(d, key)
    assert [c["activity_type"] for c in worker.answer()] == ["reserve"]
    worker.run_activity("R1")
    assert [c["type"] for c in worker.answer()] == ["START_TIMER"]
    d.run_until(d.clock.now_ms() + 24 * HOUR_MS + 1)  # due times fire strictly after
    assert [c["activity_type"] for c in worker.answer()] == ["charge"]
    worker.run_activity("C1")
    assert worker.answer() == [{"type": "COMPLETE_WORKFLOW_EXECUTION", "result": '["R1","C1"]'}]
    events = d.check(key)
    assert d.run(key)["status"] == "COMPLETED"
    assert Replayer(workflows=[Order]).replay(events).commands == []


def test_cancelled_order_releases_its_reservation_then_is_canceled_on_the_engine(d):
    key, _ = d.start(workflow_id="o-2", input='["o-2"]')
    worker = StickyWorker(d, key)
    worker.answer()
    worker.run_activity("R2")
    worker.answer()
    d.send("REQUEST_CANCEL", workflow_id="o-2", run_id="", reason="customer", identity="client")
    cancel_timer, release = worker.answer()
    assert cancel_timer == {"type": "CANCEL_TIMER", "timer_id": "2"}
    assert (release["activity_type"], decode(release["input"])) == ("release", ["R2"])
    worker.run_activity("released")
    assert worker.answer() == [{"type": "CANCEL_WORKFLOW_EXECUTION", "details": None}]
    events = d.check(key)
    assert d.run(key)["status"] == "CANCELED"
    assert Replayer(workflows=[Order]).replay(events).commands == []


@workflow.defn(name="Stamped")
class Stamped:
    """Its command depends on workflow.now(), so a replay that sees another time fails."""

    @workflow.run
    async def run(self) -> str:
        now_ms = int(workflow.now().timestamp() * 1000)
        return await workflow.execute_activity(f"stamp-{now_ms}", start_to_close_timeout=timedelta(seconds=10))


def test_a_transient_task_attempt_runs_at_its_scheduled_time_and_its_history_replays(d):
    key, _ = d.start(workflow_type="Stamped", input="[]")
    definition = WorkflowDefinition.of(Stamped)
    d.run_until(d.clock.now_ms() + 11_000)  # attempt 1 is never answered: it times out
    d.clock.advance(2_000)
    d.fail_task(key)  # attempt 2 fails too; attempt 3 is out
    shown = d.shown(key)
    assert shown[-1]["attributes"]["attempt"] == 3 and shown[:-1] == d.history(key)
    d.clock.advance(5_000)  # the worker answers a while after the task was scheduled
    outcome = WorkflowInstance(definition, shown).activate()
    (command,) = outcome.commands
    assert command["activity_type"] == f"stamp-{shown[-1]['event_time_ms']}"
    d.complete(key, outcome.commands, attempt=3)
    events = d.check(key, closed=False)
    assert events[4] == shown[-1]  # written as shown: the replay sees the same time
    assert Replayer(workflows=[Stamped]).replay(events).commands == []
