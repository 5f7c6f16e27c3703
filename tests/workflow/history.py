"""Write workflow histories the way the engine does (docs/workflow-protocol.md), by hand.

`History` appends events with ids and times; `complete_task(commands)` turns a task's
commands into the events the engine would record for them. `Run` drives a
`WorkflowInstance` through a history as a sticky worker would: answer a task, let the
engine record the answer, feed what happened next.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from streamproc.activity.payloads import encode, encode_args
from streamproc.workflow.definition import WorkflowDefinition
from streamproc.workflow.instance import TaskOutcome, WorkflowInstance

START_MS = 1_790_000_000_000

_COMMAND_EVENTS = {
    "SCHEDULE_ACTIVITY_TASK": "ACTIVITY_TASK_SCHEDULED",
    "REQUEST_CANCEL_ACTIVITY_TASK": "ACTIVITY_TASK_CANCEL_REQUESTED",
    "START_TIMER": "TIMER_STARTED",
    "CANCEL_TIMER": "TIMER_CANCELED",
    "RECORD_MARKER": "MARKER_RECORDED",
    "COMPLETE_WORKFLOW_EXECUTION": "WORKFLOW_EXECUTION_COMPLETED",
    "FAIL_WORKFLOW_EXECUTION": "WORKFLOW_EXECUTION_FAILED",
    "CANCEL_WORKFLOW_EXECUTION": "WORKFLOW_EXECUTION_CANCELED",
    "CONTINUE_AS_NEW_WORKFLOW_EXECUTION": "WORKFLOW_EXECUTION_CONTINUED_AS_NEW",
    "START_CHILD_WORKFLOW_EXECUTION": "START_CHILD_WORKFLOW_EXECUTION_INITIATED",
    "SIGNAL_EXTERNAL_WORKFLOW_EXECUTION": "SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED",
    "REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION": "REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED",
}


class History:
    def __init__(self, workflow_type: str, *args: Any, workflow_id: str = "wf-1",
                 run_id: str = "run-1", task_queue: str = "orders", start_ms: int = START_MS,
                 run_timeout_ms: int = 0, start_signal: tuple[str, list[Any]] | None = None) -> None:
        self.events: list[dict[str, Any]] = []
        self.now_ms = start_ms
        self._scheduled_task = 0
        self._activities: dict[str, int] = {}  # activity id -> scheduled event id
        self._updates: dict[str, dict[str, Any]] = {}  # update id -> request, once sent
        self.add("WORKFLOW_EXECUTION_STARTED", workflow_id=workflow_id, workflow_type=workflow_type,
                 task_queue=task_queue, input=encode_args(args), workflow_execution_timeout_ms=0,
                 workflow_run_timeout_ms=run_timeout_ms, workflow_task_timeout_ms=10_000, attempt=1,
                 original_execution_run_id=run_id, first_execution_run_id=run_id,
                 continued_execution_run_id="", retry_policy=None, identity="client",
                 workflow_execution_expiration_time_ms=0)
        if start_signal is not None:  # signal-with-start: recorded before the first task
            self.signaled(*start_signal)
        self.schedule_task()

    def add(self, event_type: str, **attributes: Any) -> dict[str, Any]:
        event = {"event_id": len(self.events) + 1, "event_type": event_type,
                 "event_time_ms": self.now_ms, "attributes": attributes}
        self.events.append(event)
        return event

    def advance(self, delta: timedelta) -> None:
        self.now_ms += delta // timedelta(milliseconds=1)

    # -- workflow tasks ---------------------------------------------------------------------
    def schedule_task(self, attempt: int = 1) -> dict[str, Any]:
        event = self.add("WORKFLOW_TASK_SCHEDULED", task_queue="orders",
                         start_to_close_timeout_ms=10_000, attempt=attempt)
        self._scheduled_task = event["event_id"]
        return event

    def complete_task(self, commands: list[dict[str, Any]]) -> None:
        started = self.add("WORKFLOW_TASK_STARTED", scheduled_event_id=self._scheduled_task,
                           identity="worker")["event_id"]
        completed = self.add("WORKFLOW_TASK_COMPLETED", scheduled_event_id=self._scheduled_task,
                             started_event_id=started, identity="worker")["event_id"]
        for command in commands:
            if command["type"].endswith("_UPDATE"):
                self._update_outcome(command)
                continue
            attributes = {k: v for k, v in command.items() if k != "type"}
            attributes["workflow_task_completed_event_id"] = completed
            event = self.add(_COMMAND_EVENTS[command["type"]], **attributes)
            if command["type"] == "SCHEDULE_ACTIVITY_TASK":
                self._activities[command["activity_id"]] = event["event_id"]

    def send_update(self, update_id: str, name: str, args: list[Any] = ()) -> dict[str, Any]:
        """An update for the next task to carry (no event: the engine admits it in state)."""
        request = {"update_id": update_id, "name": name, "input": encode_args(list(args)), "identity": "client"}
        self._updates[update_id] = request
        return request

    def _update_outcome(self, command: dict[str, Any]) -> None:
        request = self._updates.get(command["update_id"])
        if command["type"] == "ACCEPT_UPDATE":
            event = self.add("WORKFLOW_EXECUTION_UPDATE_ACCEPTED", protocol_instance_id=request["update_id"],
                             accepted_request_message_id=f"{request['update_id']}/request",
                             accepted_request_sequencing_event_id=self._scheduled_task,
                             accepted_request={"meta": {"update_id": request["update_id"], "identity": "client"},
                                               "input": {"name": request["name"], "args": request["input"]}})
            request["accepted_event_id"] = event["event_id"]
        elif command["type"] == "COMPLETE_UPDATE":
            outcome = {"failure": command["failure"]} if "failure" in command else {"success": command["result"]}
            self.add("WORKFLOW_EXECUTION_UPDATE_COMPLETED", meta={"update_id": request["update_id"]},
                     update_id=request["update_id"], accepted_event_id=request["accepted_event_id"], outcome=outcome)
        # REJECT_UPDATE writes nothing

    def fail_task(self, cause: str = "WORKFLOW_WORKER_UNHANDLED_FAILURE") -> None:
        started = self.add("WORKFLOW_TASK_STARTED", scheduled_event_id=self._scheduled_task,
                           identity="worker")["event_id"]
        self.add("WORKFLOW_TASK_FAILED", scheduled_event_id=self._scheduled_task,
                 started_event_id=started, cause=cause, failure=None, identity="worker")

    def time_out_task(self) -> None:
        started = self.add("WORKFLOW_TASK_STARTED", scheduled_event_id=self._scheduled_task,
                           identity="")["event_id"]
        self.add("WORKFLOW_TASK_TIMED_OUT", scheduled_event_id=self._scheduled_task,
                 started_event_id=started, timeout_type="START_TO_CLOSE")

    # -- what happens while the code waits --------------------------------------------------
    def activity_completed(self, activity_id: str, result: Any) -> None:
        scheduled, started = self._activity_started(activity_id)
        self.add("ACTIVITY_TASK_COMPLETED", scheduled_event_id=scheduled, started_event_id=started,
                 result=encode(result), identity="activity-worker")

    def activity_failed(self, activity_id: str, message: str, *, error_type: str = "Error",
                        retry_state: str = "MAXIMUM_ATTEMPTS_REACHED") -> None:
        scheduled, started = self._activity_started(activity_id)
        self.add("ACTIVITY_TASK_FAILED", scheduled_event_id=scheduled, started_event_id=started,
                 failure=_failure(message, kind="APPLICATION", type=error_type),
                 retry_state=retry_state, identity="activity-worker")

    def activity_timed_out(self, activity_id: str, timeout_type: str = "START_TO_CLOSE") -> None:
        scheduled, started = self._activity_started(activity_id)
        short = "".join(w.capitalize() for w in timeout_type.split("_"))
        self.add("ACTIVITY_TASK_TIMED_OUT", scheduled_event_id=scheduled, started_event_id=started,
                 failure=_failure(f"activity {short} timeout", kind="TIMEOUT", timeout_type=timeout_type),
                 retry_state="MAXIMUM_ATTEMPTS_REACHED")

    def activity_canceled(self, activity_id: str) -> None:
        scheduled = self._activities[activity_id]
        self.add("ACTIVITY_TASK_CANCELED", scheduled_event_id=scheduled, started_event_id=0,
                 latest_cancel_requested_event_id=0, details=None)

    def timer_fired(self, timer_id: str) -> None:
        started = next(e["event_id"] for e in self.events if e["event_type"] == "TIMER_STARTED"
                       and e["attributes"]["timer_id"] == timer_id)
        self.add("TIMER_FIRED", timer_id=timer_id, started_event_id=started)

    def signaled(self, name: str, args: list[Any] | tuple[Any, ...] = ()) -> None:
        self.add("WORKFLOW_EXECUTION_SIGNALED", signal_name=name, input=encode_args(list(args)), identity="client",
                 external_workflow_execution=None)

    def cancel_requested(self) -> None:
        self.add("WORKFLOW_EXECUTION_CANCEL_REQUESTED", cause="", identity="client")

    def _activity_started(self, activity_id: str) -> tuple[int, int]:
        scheduled = self._activities[activity_id]
        started = self.add("ACTIVITY_TASK_STARTED", scheduled_event_id=scheduled,
                           identity="activity-worker", attempt=1, last_failure=None)["event_id"]
        return scheduled, started


def _failure(message: str, **fields: Any) -> dict[str, Any]:
    record = {"message": message, "kind": "APPLICATION", "type": "", "non_retryable": False,
              "next_retry_delay_ms": -1, "timeout_type": "", "details": None, "stack_trace": "",
              "cause": None}
    record.update(fields)
    return record


class Run:
    """A sticky worker's view of one run: one instance, fed only what is new."""

    def __init__(self, workflow_cls: type, *args: Any, **history_options: Any) -> None:
        self.definition = WorkflowDefinition.of(workflow_cls)
        self.history = History(self.definition.name, *args, **history_options)
        self.instance = WorkflowInstance(self.definition, self.history.events)
        self._seen = len(self.history.events)

    def activate(self, updates: list[dict[str, Any]] = ()) -> TaskOutcome:
        """Answer the open task with the sticky instance (carrying `updates`, as a worker's task)."""
        new = self.history.events[self._seen:]
        self._seen = len(self.history.events)
        if new:
            self.instance.extend(new)
        self.instance.offer_updates(list(updates))
        return self.instance.activate()

    def step(self, updates: list[dict[str, Any]] = ()) -> list[dict[str, Any]]:
        """Answer the open task and let the engine record the commands; returns them."""
        outcome = self.activate(updates)
        assert not outcome.failed, outcome.failure
        assert outcome.commands is not None
        self.history.complete_task(outcome.commands)
        return outcome.commands

    def replay(self) -> TaskOutcome:
        """Answer the open task with a fresh instance that replays the whole history."""
        return WorkflowInstance(self.definition, self.history.events).activate()

