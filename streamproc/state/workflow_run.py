"""A workflow run as the engine keeps it: what it needs to process the run's next command.

`WorkflowRun` is the aggregate the workflow processors read and change: identity,
status, timeouts, the workflow task that is out, events buffered while it is out, the
activities and timers the workflow has open, and the deadlines armed for it. Its
history lives apart (`History`). It is stored as one JSON document (`to_json` /
`from_json`, the same keys and shapes the engine has always written, so documents in
RocksDB and the changelog stay readable both ways). The parts it holds are in
`state/workflow_run_parts.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from streamproc.semantics.workflow_events import ContinueAsNewInitiator
from streamproc.semantics.workflow_ids import WorkflowExecutionStatus
from streamproc.semantics.workflow_timeouts import WorkflowTimeouts
from streamproc.state.workflow_run_parts import (PendingEvent, ResultWaiter, RunActivity, RunChild, RunTimeouts, RunTimer,
                                                  RunUpdate, WorkflowTaskOut)


#: Looked up once: a member's lookup on its enum class is a Python call, and `is_open` is
#: asked several times per command.
_RUNNING = WorkflowExecutionStatus.RUNNING

@dataclass(slots=True)
class RunStart:
    """What a new run is started with: by a client's START, or after a closed run (retry,
    continue-as-new)."""

    run_id: str
    workflow_id: str
    workflow_type: str
    task_queue: str
    input: str | None
    timeouts: WorkflowTimeouts
    #: The retry policy as its record (`policy_to_record`), or None.
    retry_policy: dict | None
    attempt: int
    execution_expiration_ms: int
    identity: str = ""
    request_id: str = ""
    first_execution_run_id: str = ""
    continued_execution_run_id: str = ""
    initiator: ContinueAsNewInitiator = ContinueAsNewInitiator.UNSPECIFIED
    first_task_backoff_ms: int = 0
    continued_failure: dict | None = None
    #: The parent of a child workflow: workflow_id, run_id, initiated_event_id.
    parent: dict | None = None
    #: A cron workflow's schedule ("" for any other workflow), kept by every run of the chain.
    cron_schedule: str = ""
    #: The result of the chain's last completed run, passed to the next (cron, or a retry
    #: after a run timeout) as Temporal does.
    last_completion_result: str | None = None
    #: The schedule that started the chain: schedule_id, tracked (told when the chain ends).
    scheduled_by: dict | None = None
    memo: dict | None = None
    search_attributes: dict | None = None
    #: Clients waiting for the chain's close (the START's close reply, or carried from the
    #: previous run).
    result_waiters: list[ResultWaiter] = field(default_factory=list)


@dataclass(slots=True)
class WorkflowRun:
    workflow_id: str
    run_id: str
    workflow_type: str
    task_queue: str
    input: str | None
    identity: str
    #: The request id of the START that began the chain (kept by retries and continue-as-new).
    start_request_id: str
    status: WorkflowExecutionStatus
    attempt: int
    timeouts: RunTimeouts
    retry_policy: dict | None
    execution_expiration_ms: int
    run_expiration_ms: int
    start_time_ms: int
    execution_time_ms: int
    close_time_ms: int
    first_execution_run_id: str
    next_event_id: int = 1
    history_size_bytes: int = 0
    task: WorkflowTaskOut | None = None
    #: The attempt the next workflow task gets.
    task_attempt: int = 1
    buffered: list[PendingEvent] = field(default_factory=list)
    activities: dict[int, RunActivity] = field(default_factory=dict)
    timers: dict[str, RunTimer] = field(default_factory=dict)
    #: kind (TASK_TIME_OUT, RUN_TIME_OUT, ...) -> due_ms of the one deadline armed of that kind
    deadlines: dict[str, int] = field(default_factory=dict)
    cancel_requested: bool = False
    new_execution_run_id: str = ""
    limit_warned: bool = False
    #: The first event the next task ships (None: the whole history; stored only once set).
    task_history_from: int | None = None
    #: The identity that answered the last completed task (stored only once set): an answer
    #: riding along is another worker's guess unless it names this one (`ride_along`).
    task_answered_by: str = ""
    #: Signals recorded so far (limited per run; stored only once set).
    signal_count: int = 0
    #: Updates by update id, admitted, accepted or completed (stored only once set).
    updates: dict[str, RunUpdate] = field(default_factory=dict)
    #: Child workflows not closed yet, by initiated event id (stored only once set).
    children: dict[int, RunChild] = field(default_factory=dict)
    #: Signals and cancel requests to other workflows not answered yet: initiated event id
    #: -> SIGNAL or CANCEL (stored only once set).
    externals: dict[int, str] = field(default_factory=dict)
    #: A child's parent: workflow_id, run_id, initiated_event_id (kept by its next runs).
    parent: dict | None = None
    #: Queries that wait for the next workflow task, so they see what is buffered now
    #: (stored only once set): the QUERY_TASK values, with the caller's request id and
    #: reply partition.
    waiting_queries: list[dict] = field(default_factory=list)
    #: A cron workflow's schedule (stored only when set).
    cron_schedule: str = ""
    #: The schedule that started the chain, and the chain's memo and search attributes
    #: (kept by its next runs; stored only once set).
    scheduled_by: dict | None = None
    memo: dict | None = None
    search_attributes: dict | None = None
    #: Clients waiting for the run's close, answered when it closes (stored only once set;
    #: at most MAX_RESULT_WAITERS, engine/workflows/result_waiters.py).
    result_waiters: list[ResultWaiter] = field(default_factory=list)
    #: Local activity markers journaled while a task is out, in the order they came
    #: (RECORD_MARKER attributes; stored only once set): written when a task completes.
    journaled_markers: list[dict] = field(default_factory=list)
    #: The worker whose journal they are (stored with them).
    journaled_by: str = ""

    @classmethod
    def begin(cls, start: RunStart, now_ms: int, run_expiration_ms: int, execution_time_ms: int) -> WorkflowRun:
        return cls(
            workflow_id=start.workflow_id, run_id=start.run_id, workflow_type=start.workflow_type,
            task_queue=start.task_queue, input=start.input, identity=start.identity,
            start_request_id=start.request_id, status=WorkflowExecutionStatus.RUNNING, attempt=start.attempt,
            timeouts=RunTimeouts.of(start.timeouts), retry_policy=start.retry_policy,
            execution_expiration_ms=start.execution_expiration_ms, run_expiration_ms=run_expiration_ms,
            start_time_ms=now_ms, execution_time_ms=execution_time_ms, close_time_ms=0,
            first_execution_run_id=start.first_execution_run_id or start.run_id, parent=start.parent,
            cron_schedule=start.cron_schedule, scheduled_by=start.scheduled_by, memo=start.memo,
            search_attributes=start.search_attributes, result_waiters=list(start.result_waiters))

    # status ------------------------------------------------------------------------------
    @property
    def is_open(self) -> bool:
        return self.status is _RUNNING

    def closed(self, status: WorkflowExecutionStatus, now_ms: int) -> None:
        """The run is over: nothing is out, nothing waits, nothing is open any more."""
        self.status = status
        self.close_time_ms = now_ms
        self.task = None
        self.buffered = []
        self.activities = {}
        self.journaled_markers, self.journaled_by = [], ""

    def successor(self, new_run_id: str, initiator: ContinueAsNewInitiator, *, attempt: int, backoff_ms: int = 0,
                  continued_failure: dict | None = None, last_completion_result: str | None = None,
                  **changes: Any) -> RunStart:
        """The start of the run that follows this closed one (retry, cron or continue-as-new):
        the same workflow id, chain deadline, cron schedule and start request id; type,
        queue, input and timeouts from `changes` or inherited. Continue-as-new drops the
        cron schedule, as Temporal does (its new run is no cron run). The clients waiting
        for the chain's close move to the new run."""
        self.new_execution_run_id = new_run_id
        waiters = [w for w in self.result_waiters if w.follow_runs]
        self.result_waiters = []
        continued_as_new = initiator is ContinueAsNewInitiator.WORKFLOW
        return RunStart(
            run_id=new_run_id, workflow_id=self.workflow_id,
            workflow_type=changes.get("workflow_type", self.workflow_type),
            task_queue=changes.get("task_queue", self.task_queue), input=changes.get("input", self.input),
            timeouts=changes.get("timeouts", self.timeouts.as_workflow_timeouts()),
            retry_policy=self.retry_policy, attempt=attempt, execution_expiration_ms=self.execution_expiration_ms,
            identity=self.identity, request_id=self.start_request_id,
            first_execution_run_id=self.first_execution_run_id, continued_execution_run_id=self.run_id,
            initiator=initiator, first_task_backoff_ms=backoff_ms, continued_failure=continued_failure,
            parent=self.parent, cron_schedule="" if continued_as_new else self.cron_schedule,
            last_completion_result=last_completion_result, scheduled_by=self.scheduled_by, memo=self.memo,
            search_attributes=self.search_attributes, result_waiters=waiters)

    # history -----------------------------------------------------------------------------
    def take_event_id(self, size_bytes: int) -> int:
        """The id of the event being appended, counted with its size."""
        event_id = self.next_event_id
        self.next_event_id += 1
        self.history_size_bytes += size_bytes
        return event_id

    def take_buffered(self) -> list[PendingEvent]:
        """The events that arrived while the task was out, for appending now; what they
        closed is no longer open for the workflow's commands."""
        if not self.buffered and not self.timers and not self.activities:
            return []  # asked at every task's end: most often nothing at all to take or forget
        buffered, self.buffered = self.buffered, []
        self.timers = {t: timer for t, timer in self.timers.items() if not timer.fired}
        self.activities = {s: a for s, a in self.activities.items() if not a.closed}
        return buffered

    # activities and timers ---------------------------------------------------------------
    def open_activity_ids(self) -> set[str]:
        return {a.activity_id for a in self.activities.values() if not a.closed}

    def cancelable_activities(self) -> set[int]:
        """Scheduled event ids of activities whose cancellation was not requested yet."""
        return {s for s, a in self.activities.items() if not a.cancel_requested}

    def pending_activities(self) -> dict[int, RunActivity]:
        return {s: a for s, a in self.activities.items() if not a.closed}

    def admitted_updates(self) -> list[str]:
        """Ids of updates no workflow task has carried to the code yet, oldest first."""
        if not self.updates:  # most runs: asked several times per workflow task
            return []
        carried = set(self.task.updates) if self.task is not None else set()
        return [u for u, update in self.updates.items() if update.state == "ADMITTED" and u not in carried]

    def in_flight_updates(self) -> int:
        return sum(1 for update in self.updates.values() if update.state != "COMPLETED")

    def pending_timers(self) -> dict[str, RunTimer]:
        return {t: timer for t, timer in self.timers.items() if not timer.fired}

    # the stored document -----------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        doc = {
            "workflow_id": self.workflow_id, "run_id": self.run_id, "workflow_type": self.workflow_type,
            "task_queue": self.task_queue, "input": self.input, "identity": self.identity,
            "start_request_id": self.start_request_id, "status": self.status.name, "attempt": self.attempt,
            "timeouts": self.timeouts.to_json(), "retry_policy": self.retry_policy,
            "execution_expiration_ms": self.execution_expiration_ms, "run_expiration_ms": self.run_expiration_ms,
            "start_time_ms": self.start_time_ms, "execution_time_ms": self.execution_time_ms,
            "close_time_ms": self.close_time_ms, "first_execution_run_id": self.first_execution_run_id,
            "next_event_id": self.next_event_id, "history_size_bytes": self.history_size_bytes,
            "task": self.task.to_json() if self.task is not None else None, "task_attempt": self.task_attempt,
            # (Empty ones without a comprehension each: a run's document is stored by every command.)
            "buffered": [e.to_json() for e in self.buffered] if self.buffered else [],
            "activities": {str(s): a.to_json() for s, a in self.activities.items()} if self.activities else {},
            "timers": {t: timer.to_json() for t, timer in self.timers.items()} if self.timers else {},
            "deadlines": dict(self.deadlines), "cancel_requested": self.cancel_requested,
            "new_execution_run_id": self.new_execution_run_id, "limit_warned": self.limit_warned,
        }
        if self.task_history_from is not None:
            doc["task_history_from"] = self.task_history_from
        if self.task_answered_by:
            doc["task_answered_by"] = self.task_answered_by
        if self.signal_count:
            doc["signal_count"] = self.signal_count
        if self.updates:
            doc["updates"] = {u: update.to_json() for u, update in self.updates.items()}
        if self.children:
            doc["children"] = {str(i): child.to_json() for i, child in self.children.items()}
        if self.externals:
            doc["externals"] = {str(i): kind for i, kind in self.externals.items()}
        if self.parent is not None:
            doc["parent"] = self.parent
        if self.waiting_queries:
            doc["waiting_queries"] = self.waiting_queries
        if self.cron_schedule:
            doc["cron_schedule"] = self.cron_schedule
        if self.scheduled_by is not None:
            doc["scheduled_by"] = self.scheduled_by
        if self.memo is not None:
            doc["memo"] = self.memo
        if self.search_attributes is not None:
            doc["search_attributes"] = self.search_attributes
        if self.result_waiters:
            doc["result_waiters"] = [w.to_json() for w in self.result_waiters]
        if self.journaled_markers:
            doc["journaled_markers"] = self.journaled_markers
            doc["journaled_by"] = self.journaled_by
        return doc

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> WorkflowRun:
        t = d["timeouts"]
        return cls(
            workflow_id=d["workflow_id"], run_id=d["run_id"], workflow_type=d["workflow_type"],
            task_queue=d["task_queue"], input=d["input"], identity=d["identity"],
            start_request_id=d["start_request_id"], status=WorkflowExecutionStatus[d["status"]],
            attempt=d["attempt"], timeouts=RunTimeouts(t["execution_ms"], t["run_ms"], t["task_ms"]),
            retry_policy=d["retry_policy"], execution_expiration_ms=d["execution_expiration_ms"],
            run_expiration_ms=d["run_expiration_ms"], start_time_ms=d["start_time_ms"],
            execution_time_ms=d["execution_time_ms"], close_time_ms=d["close_time_ms"],
            first_execution_run_id=d["first_execution_run_id"], next_event_id=d["next_event_id"],
            history_size_bytes=d["history_size_bytes"],
            task=WorkflowTaskOut.from_json(d["task"]) if d["task"] is not None else None,
            task_attempt=d["task_attempt"], buffered=[PendingEvent(*e) for e in d["buffered"]],
            activities={int(s): RunActivity(**a) for s, a in d["activities"].items()},
            timers={timer_id: RunTimer(**timer) for timer_id, timer in d["timers"].items()},
            deadlines=dict(d["deadlines"]), cancel_requested=d["cancel_requested"],
            new_execution_run_id=d["new_execution_run_id"], limit_warned=d["limit_warned"],
            task_history_from=d.get("task_history_from"),
            task_answered_by=d.get("task_answered_by", ""), signal_count=d.get("signal_count", 0),
            updates={u: RunUpdate(**update) for u, update in d.get("updates", {}).items()},
            children={int(i): RunChild(**child) for i, child in d.get("children", {}).items()},
            externals={int(i): kind for i, kind in d.get("externals", {}).items()}, parent=d.get("parent"),
            waiting_queries=d.get("waiting_queries", []), cron_schedule=d.get("cron_schedule", ""),
            scheduled_by=d.get("scheduled_by"), memo=d.get("memo"), search_attributes=d.get("search_attributes"),
            result_waiters=[ResultWaiter.from_json(w) for w in d.get("result_waiters", ())],
            journaled_markers=d.get("journaled_markers", []), journaled_by=d.get("journaled_by", ""))
