"""Drive workflow runs through a Harness: send commands, read replies, tasks and histories."""

from __future__ import annotations

import orjson

from streamproc.clock import ManualClock
from streamproc.engine.processing import Limits
from streamproc.engine.partition import PartitionProcessor
from streamproc.protocol import codec
from streamproc.protocol.records import Record, RecordType
from streamproc.semantics.workflow_events import EventType
from streamproc.semantics.workflow_history import check_well_formed
from streamproc.state.activities import Activities
from streamproc.state.db import PendingWrites
from streamproc.state.history import History
from streamproc.state.workflows import Workflows
from tests.engine.harness import Harness

S = 1000  # ms


class WorkflowDriver:
    def __init__(self, path, limits: Limits = Limits(), start_ms: int = 1_000_000) -> None:
        self.h = Harness(path, clock=ManualClock(start_ms=start_ms))
        self.h.proc = PartitionProcessor(0, self.h.db, self.h.clock, limits)
        self.h.proc.on_processed = self.h.checker.processed
        self.clock = self.h.clock
        self.replies: list[Record] = []

    def send(self, intent: str, key: int = -1, request_id: str | None = None, reply_partition: int = 0,
             **value) -> tuple[list, list]:
        """Process one WORKFLOW command; returns (events and rejections, replies)."""
        return self.send_record(Record.command("WORKFLOW", intent, value, key=key, request_id=request_id,
                                               reply_partition=reply_partition))

    def send_record(self, cmd: Record) -> tuple[list, list]:
        """Process one command of any value type; returns (events and rejections, replies)."""
        self.h.proc.process(codec.encode(cmd), None, self.h.position)
        self.h.position += 1
        replies = [codec.decode(codec.encode(r)) for _, r in self.h.proc.output.replies]
        self.replies += replies
        return self.h.commit(), replies

    def start(self, workflow_id: str = "w1", request_id: str | None = None, **value) -> tuple[int, str]:
        value = {"workflow_type": "Order", "task_queue": "orders", "input": '["x"]', **value}
        _, (reply,) = self.send("START", request_id=request_id, workflow_id=workflow_id, **value)
        assert reply.intent == "STARTED", reply.rejection_reason
        return reply.key, reply.value["run_id"]

    def complete(self, run_key: int, commands: list, scheduled_event_id: int | None = None,
                 identity: str = "wf-worker", attempt: int = 0) -> list[Record]:
        """TASK_COMPLETE for the task out now (or the one named); attempt 0 is not checked."""
        scheduled = scheduled_event_id if scheduled_event_id is not None else self.task(run_key)["scheduled_event_id"]
        events, _ = self.send("TASK_COMPLETE", run_key, scheduled_event_id=scheduled, identity=identity,
                              attempt=attempt, commands=orjson.dumps(commands).decode())
        return events

    def fail_task(self, run_key: int, cause: str = "WORKFLOW_WORKER_UNHANDLED_FAILURE") -> list[Record]:
        task = self.task(run_key)
        events, _ = self.send("TASK_FAIL", run_key, scheduled_event_id=task["scheduled_event_id"],
                              attempt=task["attempt"], identity="wf-worker", cause=cause,
                              failure={"message": "boom", "kind": "APPLICATION", "type": "Boom"})
        return events

    def pump(self) -> list[Record]:
        """Process the commands the engine wrote for other workflows (a child's start, a
        signal, their answers), as the partitions they go to would, until none is left.
        One partition here: every workflow id maps to it. Returns what they produced."""
        produced = []
        while self.h.commands:
            cmd = self.h.commands.pop(0)
            self.h.proc.process(codec.encode(cmd), None, self.h.position)
            self.h.position += 1
            produced += self.h.commit()
        return produced

    def run(self, run_key: int) -> dict:
        """The run as its stored document (the JSON keys tests read)."""
        run = Workflows(PendingWrites(self.h.db)).get(run_key)
        return run.to_json() if run is not None else None

    def current_key(self, workflow_id: str) -> int | None:
        return Workflows(PendingWrites(self.h.db)).current_key(workflow_id)

    def activity(self, key: int):
        return Activities(PendingWrites(self.h.db)).get(key)

    def task(self, run_key: int) -> dict | None:
        return self.run(run_key)["task"]

    def history(self, run_key: int) -> list[dict]:
        return History(PendingWrites(self.h.db)).events(run_key, 1, self.run(run_key)["next_event_id"] - 1)

    def types(self, run_key: int) -> list[str]:
        return [e["event_type"] for e in self.history(run_key)]

    def check(self, run_key: int, closed: bool = True) -> list[dict]:
        """The run's history, asserted well-formed (SEMANTICS.md 6.2)."""
        events = self.history(run_key)
        problems = check_well_formed([(e["event_id"], EventType[e["event_type"]], e["attributes"])
                                      for e in events], closed=closed)
        assert problems == [], problems
        return events

    def workflow_tasks(self) -> list[Record]:
        return [r for _, r in self.h.tasks if r.value_type == "WORKFLOW"]

    def shown(self, run_key: int) -> list[dict]:
        """The events the run's latest workflow task record carries (all its pages)."""
        pages = [r for r in self.workflow_tasks() if r.key == run_key]
        last = pages[-1].value
        pages = pages[len(pages) - last["pages"]:]
        return [e for r in pages for e in orjson.loads(r.value["history"])]

    def activity_tasks(self) -> list[Record]:
        return [r for _, r in self.h.tasks if r.value_type == "ACTIVITY_TASK"]

    def run_until(self, until_ms: int) -> list[Record]:
        """Advance the clock to each due time up to `until_ms`, processing what the checker writes."""
        produced = []
        while True:
            wait = self.h.checker.wait_ms(self.clock.now_ms())
            if wait is None or self.clock.now_ms() + wait > until_ms:
                break
            self.clock.advance(wait)
            produced += self.h.check_due()
        self.clock.set(until_ms)
        return produced

    def close(self) -> None:
        self.h.close()


def attrs(events: list[dict], event_type: str) -> list[dict]:
    return [e["attributes"] for e in events if e["event_type"] == event_type]


def rejections(records: list[Record]) -> list[Record]:
    return [r for r in records if r.record_type is RecordType.COMMAND_REJECTION]
