"""Drive schedules through a Harness: create and change them, move the manual clock through
their action times, and play the workflows they start (one partition: every command the
engine writes for a workflow or a schedule is processed here)."""

from __future__ import annotations

from datetime import datetime, timezone

import orjson

from streamproc.protocol import codec
from streamproc.protocol.records import Record
from streamproc.state.db import PendingWrites
from streamproc.state.schedules import Schedules, StoredSchedule
from tests.engine.workflow_driver import WorkflowDriver

COMPLETE = {"type": "COMPLETE_WORKFLOW_EXECUTION", "result": '"done"'}
FAIL = {"type": "FAIL_WORKFLOW_EXECUTION", "failure": {"message": "broke", "kind": "APPLICATION", "type": "E"}}
ACTION = {"workflow_id": "report", "workflow_type": "Report", "task_queue": "reports", "input": '["eu"]'}


def ms(text: str) -> int:
    """Epoch ms of an RFC 3339 UTC time like 2026-05-04T11:00:00Z."""
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def iso(at_ms: int) -> str:
    return datetime.fromtimestamp(at_ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class ScheduleDriver(WorkflowDriver):
    def __init__(self, path, start: str = "2026-05-04T10:00:00Z") -> None:
        super().__init__(path, start_ms=ms(start))
        #: Finish each workflow the schedule starts at once (COMPLETE, FAIL or None: leave it running).
        self.finish_with: dict | None = COMPLETE

    def send_schedule(self, intent: str, schedule_id: str = "s1", request_id: str | None = None,
                      **value) -> tuple[list[Record], list[Record]]:
        cmd = Record.command("SCHEDULE", intent, {"schedule_id": schedule_id, **value}, request_id=request_id,
                             reply_partition=0)
        self.h.proc.process(codec.encode(cmd), None, self.h.position)
        self.h.position += 1
        replies = [codec.decode(codec.encode(r)) for _, r in self.h.proc.output.replies]
        events = self.h.commit()
        self.settle()
        return events, replies

    def create(self, spec: dict, *, schedule_id: str = "s1", policy: dict | None = None, state: dict | None = None,
               action: dict | None = None, patch: dict | None = None, **value) -> tuple[list[Record], list[Record]]:
        definition = {"action": {"start_workflow": action or ACTION}, "spec": spec, "policy": policy or {},
                      "state": state or {}}
        return self.send_schedule("CREATE", schedule_id, schedule=orjson.dumps(definition).decode(),
                                  patch=orjson.dumps(patch).decode() if patch else None, **value)

    def patch(self, patch: dict, schedule_id: str = "s1") -> tuple[list[Record], list[Record]]:
        return self.send_schedule("PATCH", schedule_id, patch=orjson.dumps(patch).decode())

    def describe(self, schedule_id: str = "s1") -> dict:
        _, replies = self.send_schedule("DESCRIBE", schedule_id)
        assert replies[-1].intent == "DESCRIBED", replies[-1].rejection_reason
        return orjson.loads(replies[-1].value["attributes"])

    def stored(self, schedule_id: str = "s1") -> StoredSchedule | None:
        return Schedules(PendingWrites(self.h.db)).get(schedule_id)

    def settle(self) -> None:
        """Process what the engine wrote for workflows and schedules, and finish the
        workflows started, until nothing is left."""
        while self.h.commands:
            self.pump()
            if self.finish_with is not None:
                for task in list(self.workflow_tasks()):
                    run = self.run(task.key)
                    if run["status"] == "RUNNING" and run["task"] is not None \
                            and run["task"]["scheduled_event_id"] == task.value["scheduled_event_id"]:
                        self.complete(task.key, [self.finish_with])
                self.h.tasks.clear()

    def advance_to(self, until: str | int) -> None:
        """Move the clock to each due time up to `until`, processing what comes due."""
        until_ms = ms(until) if isinstance(until, str) else until
        while True:
            wait = self.h.checker.wait_ms(self.clock.now_ms())
            if wait is None or self.clock.now_ms() + wait > until_ms:
                break
            self.clock.advance(wait)
            self.h.check_due()
            self.settle()
        self.clock.set(until_ms)

    def actions(self, schedule_id: str = "s1") -> list[dict]:
        """ACTION_STARTED events so far: workflow id and times."""
        return [{"workflow_id": e.value["workflow_id"], **orjson.loads(e.value["attributes"])}
                for e in self.h.events if e.value_type == "SCHEDULE" and e.intent == "ACTION_STARTED"
                and e.value["schedule_id"] == schedule_id]

    def started_ids(self, schedule_id: str = "s1") -> list[str]:
        return [a["workflow_id"] for a in self.actions(schedule_id)]

    def started_times(self, schedule_id: str = "s1") -> list[str]:
        return [iso(a["nominal_time_ms"]) for a in self.actions(schedule_id)]

    def terminate_run(self, run_key: int) -> None:
        """Close a workflow the schedule started (as a user would), and let the schedule hear it."""
        self.send("TERMINATE", workflow_id=self.run(run_key)["workflow_id"], reason="test")
        self.settle()
