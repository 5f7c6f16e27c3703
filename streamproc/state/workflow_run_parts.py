"""The parts of a workflow run's state, each stored as a small JSON value inside the run's
document: its timeouts, the workflow task that is out, the events buffered for the next
task, and what the workflow has open (activities, timers, children, updates) or owes an
answer to (clients waiting for the close). `WorkflowRun` (`state/workflow_run.py`) holds
them; the keys and shapes are those the engine has always written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from streamproc.protocol.wire_values import whole_ms
from streamproc.semantics.workflow_timeouts import WorkflowTimeouts



@dataclass(slots=True)
class RunTimeouts:
    """The run's timeouts in milliseconds (0: none), as WORKFLOW_EXECUTION_STARTED recorded them."""

    execution_ms: int
    run_ms: int
    task_ms: int

    @classmethod
    def of(cls, timeouts: WorkflowTimeouts) -> RunTimeouts:
        return cls(whole_ms(timeouts.execution), whole_ms(timeouts.run), whole_ms(timeouts.task))

    def as_workflow_timeouts(self) -> WorkflowTimeouts:
        return WorkflowTimeouts(*(timedelta(milliseconds=ms) for ms in (self.execution_ms, self.run_ms, self.task_ms)))

    def to_json(self) -> dict[str, int]:
        return {"execution_ms": self.execution_ms, "run_ms": self.run_ms, "task_ms": self.task_ms}


@dataclass(slots=True)
class WorkflowTaskOut:
    """The workflow task dispatched and not answered yet. A transient one (attempt 2 or
    more) has its Scheduled event written only if the attempt completes."""

    scheduled_event_id: int
    attempt: int
    scheduled_time_ms: int
    transient: bool
    #: Ids of the updates the task carries to the workflow.
    updates: list[str] = field(default_factory=list)
    #: Scheduled only to carry updates: if every one is rejected, nothing is written.
    speculative: bool = False
    #: Handed back to the worker that asked for it (a reply), not written to the task queue.
    handed_back: bool = False

    def to_json(self) -> dict[str, Any]:
        doc = {"scheduled_event_id": self.scheduled_event_id, "attempt": self.attempt,
               "scheduled_time_ms": self.scheduled_time_ms, "transient": self.transient}
        if self.updates:
            doc["updates"] = list(self.updates)
        if self.speculative:
            doc["speculative"] = True
        if self.handed_back:
            doc["handed_back"] = True
        return doc

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> WorkflowTaskOut:
        return cls(d["scheduled_event_id"], d["attempt"], d["scheduled_time_ms"], d.get("transient", False),
                   list(d.get("updates", ())), d.get("speculative", False), d.get("handed_back", False))


@dataclass(slots=True)
class RunActivity:
    """An activity the workflow scheduled (by its scheduled event id in `activities`)."""

    key: int
    activity_id: str
    activity_type: str
    #: Its close is buffered while a task is out: forgotten when the buffer is flushed.
    closed: bool = False
    cancel_requested: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "activity_id": self.activity_id, "activity_type": self.activity_type,
                "closed": self.closed, "cancel_requested": self.cancel_requested}


@dataclass(slots=True)
class RunTimer:
    """A timer the workflow started (by timer id in `timers`)."""

    due_ms: int
    started_event_id: int
    #: It fired while a task was out: a CANCEL_TIMER in that task's answer may still win.
    fired: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"due_ms": self.due_ms, "started_event_id": self.started_event_id, "fired": self.fired}


@dataclass(slots=True)
class PendingEvent:
    """An event waiting to be appended to the history. `links_started`: its
    started_event_id is the id of the event appended just before it (an activity's close
    after its start)."""

    type_name: str
    attributes: dict[str, Any]
    links_started: bool = False
    #: When it happened, if not when it is appended (an activity's start, recorded at its close).
    event_time_ms: int | None = None

    def to_json(self) -> list[Any]:
        fields = [self.type_name, self.attributes, self.links_started]
        return fields if self.event_time_ms is None else [*fields, self.event_time_ms]


@dataclass(slots=True)
class RunChild:
    """A child workflow the run started (by its initiated event id in `children`)."""

    workflow_id: str
    workflow_type: str
    parent_close_policy: str
    #: The child's first run, once it started (the parent close policy addresses it).
    run_id: str = ""
    started_event_id: int = 0
    #: Its close is buffered for the workflow: no policy applies to it any more.
    closed: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"workflow_id": self.workflow_id, "workflow_type": self.workflow_type,
                "parent_close_policy": self.parent_close_policy, "run_id": self.run_id,
                "started_event_id": self.started_event_id, "closed": self.closed}


@dataclass(slots=True)
class RunUpdate:
    """An update sent to the run (by update id in `updates`): ADMITTED (waiting for a
    workflow task to carry it to the code), ACCEPTED by its validator, or COMPLETED.
    Callers waiting for a stage are answered when the update reaches it."""

    name: str
    input: str | None
    identity: str
    state: str = "ADMITTED"
    accepted_event_id: int = 0
    completed_event_id: int = 0
    #: [request id, reply partition, stage] of each caller still waiting
    waiters: list[list[Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "input": self.input, "identity": self.identity, "state": self.state,
                "accepted_event_id": self.accepted_event_id, "completed_event_id": self.completed_event_id,
                "waiters": [list(w) for w in self.waiters]}


@dataclass(frozen=True, slots=True)
class ResultWaiter:
    """A client waiting for the run's close: the engine sends the close event to its
    replies partition under its request id. One per request id; `follow_runs`: it waits
    for the runs that follow too (handed to the next run on continue-as-new, retry, cron)."""

    reply_partition: int
    request_id: str
    follow_runs: bool = True

    def to_json(self) -> list[Any]:
        return [self.reply_partition, self.request_id, self.follow_runs]

    @classmethod
    def from_json(cls, doc: list[Any]) -> ResultWaiter:
        return cls(*doc)
