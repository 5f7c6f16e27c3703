"""Replay a run's history through its workflow code, then run the code to its next block.

History is walked in workflow-task segments. Events that resolve something (an activity
closed, a timer fired, a cancel request) are collected and delivered to the code at the
next workflow task that completed, with that task's time; the code then runs until every
coroutine waits, and the commands it issued must be the command events recorded after
that task's WorkflowTaskCompleted, in order. The last task of the history, the one a
worker is asked to complete, runs the same way except that its commands are the answer.

Sticky execution: `extend` appends what happened since, and `activate` carries on from
where the previous activation stopped, with no replay. If the previous answer did not
make it into history (its task failed or timed out), the instance starts over and
replays everything, because the code's state no longer matches the run's.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
from collections.abc import Iterable
from typing import Any

from streamproc.activity.failures import failure_from_exception
from streamproc.converter import DataConverter
from streamproc.exceptions import WorkflowQueryFailedError
from streamproc.semantics.workflow_events import COMMAND_EVENT_TYPES, EventType
from streamproc.workflow.commands import Command, describe, describe_event, is_patch_marker, mismatch, patch_id_of
from streamproc.workflow.definition import WorkflowDefinition
from streamproc.workflow.errors import (
    NON_DETERMINISTIC_ERROR,
    WORKFLOW_WORKER_UNHANDLED_FAILURE,
    NonDeterminismError,
)
from streamproc.workflow.local_activity_markers import (
    is_local_activity_marker,
    is_local_activity_marker_command,
    marker_details,
)
from streamproc.workflow.local_activity_runner import LocalActivityRunner, default_runner
from streamproc.workflow.local_activity_task import Journal, LiveLocalActivities
from streamproc.workflow.runtime import WorkflowRuntime
from streamproc.protocol.workflow_commands import WorkflowCommandType, has_event

__all__ = ["TaskOutcome", "WorkflowInstance"]

_E = EventType
_COMMAND_EVENTS = frozenset(e.name for e in COMMAND_EVENT_TYPES)
_TASK_ENDS = frozenset({_E.WORKFLOW_TASK_COMPLETED.name, _E.WORKFLOW_TASK_FAILED.name,
                        _E.WORKFLOW_TASK_TIMED_OUT.name})
_PENDING, _ABANDONED = -1, -2
# Event types as plain strings: an enum member's `.name` is a property call per event walked.
_SCHEDULED = _E.WORKFLOW_TASK_SCHEDULED.name
_COMPLETED = _E.WORKFLOW_TASK_COMPLETED.name
_RUN_STARTED = _E.WORKFLOW_EXECUTION_STARTED.name
_STARTED = _E.WORKFLOW_TASK_STARTED.name
_UPDATE_ACCEPTED = _E.WORKFLOW_EXECUTION_UPDATE_ACCEPTED.name


@dataclasses.dataclass(frozen=True, slots=True)
class TaskOutcome:
    """The answer to a workflow task: `commands` for TASK_COMPLETE, or `failure` (a
    FailureRecord dict) and `cause` for TASK_FAIL. `error` is the exception behind a
    failure, for logs and the replayer."""

    commands: list[Command] | None = None
    failure: dict[str, Any] | None = None
    cause: str | None = None
    error: BaseException | None = None
    #: Local activities are still running: the engine must schedule a new task at once
    #: even if nothing else happened (the answer is a workflow task heartbeat).
    force_new_task: bool = False

    @property
    def failed(self) -> bool:
        return self.failure is not None


class _NotSpeculable(Exception):
    """The activation `speculate` ran depends on what only the engine knows (the task's time)
    or started work that must not start twice (local activities)."""


class _WorkflowCodeFailed(Exception):
    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class WorkflowInstance:
    """One run of `definition`, kept between workflow tasks by a worker's sticky cache."""

    def __init__(self, definition: WorkflowDefinition, history_events: Iterable[dict[str, Any]],
                 *, run_id: str | None = None, data_converter: DataConverter | None = None,
                 namespace: str = "", local_activities: LocalActivityRunner | None = None,
                 checkpoint_local_activities: bool = False) -> None:
        self.definition = definition
        self.namespace = namespace  # the worker's, for workflow.info()
        #: Runs the run's local activities on first execution (the worker's).
        self._local_runner = local_activities
        #: Answer the task after each local activity outcome (`local_activity_task`).
        self._checkpoint_local = checkpoint_local_activities
        #: Payloads in this run's history and commands go through it (the worker's).
        self.data_converter = data_converter or DataConverter.default()
        self._history: list[dict[str, Any]] = list(history_events)
        self._run_id = run_id
        self._live_updates: list[dict[str, Any]] = []
        #: The local activity markers the engine keeps journaled for the open task (its
        #: next attempt carries them): their calls take them instead of running again.
        self._journaled: list[dict[str, Any]] = []
        #: Sends the open task's markers to the log (set by the worker for each task).
        self.marker_journal: Journal | None = None
        #: Set while `speculate` runs the next task ahead of the engine; and why its code
        #: could not answer ahead (it read the task's time, it called a local activity).
        self._speculating = False
        self.speculation_refused: str | None = None
        self._runtime: WorkflowRuntime | None = None
        self._start_over()

    @property
    def history_length(self) -> int:
        return len(self._history)

    def offer_updates(self, updates: list[dict[str, Any]]) -> None:
        """The updates the task being answered carries (update_id, name, input, identity):
        delivered to the code with the task's activation."""
        updates = list(updates)
        if updates != self._live_updates:  # the same again (no new task): the same outcome
            self._live_updates = updates
            self._outcome = None

    def offer_journaled(self, markers: list[dict[str, Any]]) -> None:
        """The journaled markers the task being answered carries (`journaled_markers`)."""
        markers = list(markers)
        if markers != self._journaled:
            self._journaled = markers
            self._outcome = None

    def extend(self, new_events: Iterable[dict[str, Any]]) -> None:
        """Append the events written since the history this instance has seen."""
        self._history.extend(new_events)
        self._outcome = None

    def activate(self, wait: bool = True) -> TaskOutcome | None:
        """Replay what is not replayed yet, and answer the history's last workflow task.

        Calling it again without `extend` returns the same outcome. While the task's
        local activities run, `wait=False` returns None at once: call again when one of
        `local_activity_jobs()` is done or at `local_activity_heartbeat_at()`.
        """
        if self._outcome is not None:
            return self._outcome
        try:
            commands = self._continue_live() if self._live is not None else self._advance()
            while commands is None and wait:
                assert self._live is not None
                self._live.wait()
                commands = self._continue_live()
            if commands is None:
                return None
            outcome = TaskOutcome(commands=commands, force_new_task=self._heartbeat)
        except NonDeterminismError as exc:
            outcome = TaskOutcome(failure=failure_from_exception(exc), cause=NON_DETERMINISTIC_ERROR,
                                  error=exc)
        except _WorkflowCodeFailed as failed:
            failure = failure_from_exception(failed.error, converter=self.data_converter)
            outcome = TaskOutcome(failure=failure,
                                  cause=WORKFLOW_WORKER_UNHANDLED_FAILURE, error=failed.error)
        self._live = None
        # A failed task changes nothing in history, but the code ran: replay from scratch.
        self._diverged = outcome.failed
        if not outcome.failed:
            # Its answer writes them (with the markers it carries): the run's next task has none.
            self._journaled = []
        self._outcome = outcome
        return outcome

    def speculate(self, events: Iterable[dict[str, Any]]) -> TaskOutcome | None:
        """Answer the task that `events` end with before the engine scheduled it: its
        WORKFLOW_TASK_SCHEDULED is the worker's guess (`worker/ride_along.py`), so its time is
        not the task's. None when the answer must not be sent: the code read the task's time,
        started a local activity (not started), or the task failed. The instance has run
        ahead of the run's history either way: a caller drops it unless the engine accepts
        the answer."""
        self.extend(events)
        self._live_updates = []  # the previous task's updates are not this one's
        self._speculating = True
        try:
            outcome = self.activate(wait=False)
        except _NotSpeculable:
            return None
        finally:
            self._speculating = False
        return None if outcome is None or outcome.failed or outcome.force_new_task else outcome

    @property
    def last_commands(self) -> list[Command] | None:
        """The commands of the task this instance answered last (None: none, or it failed)."""
        outcome = self._outcome
        return None if outcome is None or outcome.failed or outcome.force_new_task else outcome.commands

    def local_activity_jobs(self) -> list[concurrent.futures.Future[Any]]:
        """The local activities the live task waits on (none when it is not waiting)."""
        return self._live.jobs() if self._live is not None else []

    def local_activities_ready(self) -> bool:
        """Whether the live task can go on now (True when it is not waiting)."""
        return self._live.ready() if self._live is not None else True

    def local_activity_heartbeat_at(self) -> float | None:
        """When (monotonic seconds) the waiting task must be answered all the same."""
        return self._live.heartbeat_at if self._live is not None else None

    def query(self, query_type: str, query_input: str | None) -> str:
        """The encoded answer of the query handler `query_type` to `query_input` (a JSON
        list of arguments), on the run's state after the history this instance was given
        (replayed first if it was not yet). Nothing the run does changes: a query is
        read-only. Raises WorkflowQueryFailedError."""
        outcome = self.activate() if self._outcome is None else self._outcome
        if outcome.failed:
            raise WorkflowQueryFailedError(f"the workflow cannot answer queries: its last task failed: "
                                           f"{outcome.failure.get('message') if outcome.failure else outcome.error}")
        if self._runtime is None or not self._runtime.started:
            raise WorkflowQueryFailedError("workflow execution not ready to handle the request: "
                                           "its first workflow task has not run yet")
        try:
            hints = self._runtime.handlers.query_parameter_types(query_type)
            args = list(self.data_converter.decode_args(query_input, hints))
            return self.data_converter.encode(self._runtime.query(query_type, args))
        except WorkflowQueryFailedError:
            raise
        except Exception as exc:  # the handler's own error is the query's failure
            raise WorkflowQueryFailedError(f"{type(exc).__name__}: {exc}") from exc

    # -- the walk -------------------------------------------------------------------------
    def _start_over(self) -> None:
        if self._runtime is not None:
            self._runtime.discard()
        self._runtime = None
        self._live: LiveLocalActivities | None = None
        self._heartbeat = False
        self._cursor = 0
        self._resolutions: list[dict[str, Any]] = []
        self._unmatched: collections.deque[Command] = collections.deque()
        self._matching = False
        self._activated_task: int | None = None
        self._activated_live = False
        self._outcome: TaskOutcome | None = None
        self._diverged = False

    def _advance(self) -> list[Command] | None:
        """The commands of the history's open task (None while its local activities
        run), or [] if it has none."""
        if self._diverged:
            self._start_over()
        self._heartbeat = False
        events = self._history
        while self._cursor < len(events):
            index = self._cursor
            event = events[index]
            kind = event["event_type"]
            self._cursor += 1
            if kind == _SCHEDULED:
                self._check_all_matched(event)
                end = self._task_end(index)
                if end == _PENDING:
                    return self._run_activation(event, replaying=False, patches=frozenset(),
                                                updates=self._live_updates, markers=self._journaled)
                if end != _ABANDONED and events[end]["event_type"] == _COMPLETED:
                    self._run_activation(event, replaying=True, patches=self._patches_after(end),
                                         updates=self._updates_after(end), markers=self._local_markers_after(end))
            elif kind == _COMPLETED:
                self._matching = self._scheduled_id(event) == self._activated_task
            elif kind in _TASK_ENDS:
                if self._activated_live and self._scheduled_id(event) == self._activated_task:
                    # The answer to the live activation never made it into history.
                    self._start_over()
            elif kind == _RUN_STARTED:
                self._runtime = WorkflowRuntime(self.definition, event, self._run_id, self.data_converter,
                                                namespace=self.namespace)
            elif kind in _COMMAND_EVENTS:
                self._match(event)
            elif kind != _STARTED:
                self._resolutions.append(event)
        self._check_all_matched(None)
        return []  # the history's last workflow task is answered already

    def _run_activation(self, scheduled: dict[str, Any], *, replaying: bool, patches: frozenset[str],
                        updates: list[dict[str, Any]], markers: list[dict[str, Any]] = ()) -> list[Command]:
        if self._runtime is None:
            raise ValueError("a history must begin with WORKFLOW_EXECUTION_STARTED")
        resolutions, self._resolutions = self._resolutions, []
        commands = self._runtime.activate(resolutions, scheduled.get("event_time_ms", 0),
                                          replaying, patches, updates, markers)
        self._matching = False
        self._activated_task = scheduled["event_id"]
        self._activated_live = not replaying
        if not replaying and self._speculating and (self._runtime.time_read or self._runtime.local_activities.pending):
            self.speculation_refused = "task time read" if self._runtime.time_read else "local activity called"
            raise _NotSpeculable()
        if not replaying:
            self._live = LiveLocalActivities(self._runtime, self._local_runner or default_runner(), scheduled,
                                             self._checkpoint_local, self.marker_journal,
                                             [marker_details(m) for m in markers])
            return self._continue_live(commands)
        return self._activated(commands)

    def _continue_live(self, commands: list[Command] | None = None) -> list[Command] | None:
        """Step the live task's local activities; its commands once it can be answered."""
        assert self._live is not None
        commands = self._live.step(self._live.commands if commands is None else commands)
        if commands is None:
            return None
        self._heartbeat = self._live.heartbeat
        return self._activated(commands)

    def _activated(self, commands: list[Command]) -> list[Command]:
        assert self._runtime is not None
        if self._runtime.task_failure is not None:
            raise _WorkflowCodeFailed(self._runtime.task_failure)
        # A rejected update leaves no event to match; local activity markers are matched
        # by their call, not by position (`local_activity_state`).
        self._unmatched = collections.deque(c for c in commands if has_event(c["type"])
                                            and not is_local_activity_marker_command(c))
        return commands

    def _task_end(self, scheduled_index: int) -> int:
        """Index of the event that ended the task scheduled at `scheduled_index`;
        _PENDING if it is the history's open task, _ABANDONED if the run moved on."""
        events = self._history
        index = scheduled_index + 1
        while index < len(events) and events[index]["event_type"] == _STARTED:
            index += 1
        if index == len(events):
            return _PENDING
        return index if events[index]["event_type"] in _TASK_ENDS else _ABANDONED

    def _patches_after(self, completed_index: int) -> frozenset[str]:
        """Patch ids recorded by the task completed at `completed_index`: on replay the
        code takes a patched path exactly where the first execution did."""
        found = set()
        for index in range(completed_index + 1, len(self._history)):
            event = self._history[index]
            if event["event_type"] == _SCHEDULED:
                break
            if is_patch_marker(event):
                found.add(patch_id_of(event))
        return frozenset(found)

    def _local_markers_after(self, completed_index: int) -> list[dict[str, Any]]:
        """The local activity markers the task completed at `completed_index` recorded:
        on replay they are the outcomes of the code's local activity calls."""
        found = []
        for index in range(completed_index + 1, len(self._history)):
            event = self._history[index]
            if event["event_type"] == _SCHEDULED:
                break
            if is_local_activity_marker(event):
                found.append(event)
        return found

    def _updates_after(self, completed_index: int) -> list[dict[str, Any]]:
        """The updates the task completed at `completed_index` accepted, as their requests:
        on replay they reach the code again in that task's activation, unvalidated."""
        found = []
        for index in range(completed_index + 1, len(self._history)):
            event = self._history[index]
            if event["event_type"] == _SCHEDULED:
                break
            if event["event_type"] == _UPDATE_ACCEPTED:
                request = (event.get("attributes") or {}).get("accepted_request") or {}
                meta, given = request.get("meta") or {}, request.get("input") or {}
                found.append({"update_id": meta.get("update_id"), "name": given.get("name"),
                              "input": given.get("args"), "identity": meta.get("identity", "")})
        return found

    # -- matching commands to the events they produced ------------------------------------
    def _match(self, event: dict[str, Any]) -> None:
        if not self._matching:
            raise NonDeterminismError(f"history has {describe_event(event)} outside the "
                                      "commands of a completed workflow task")
        if is_local_activity_marker(event):
            assert self._runtime is not None
            problem = self._runtime.local_activities.marker_mismatch(event)
            if problem is not None:
                raise NonDeterminismError(problem)
            return
        while True:
            if not self._unmatched:
                if is_patch_marker(event):
                    return  # a patch the code no longer checks: Temporal ignores it too
                raise NonDeterminismError(f"history has {describe_event(event)} but the workflow "
                                          "code issues no matching command")
            command = self._unmatched[0]
            problem = mismatch(command, event)
            if problem is None:
                self._unmatched.popleft()
                assert self._runtime is not None
                self._runtime.command_recorded(command, event)
                return
            if is_patch_marker(event):
                return
            if _is_deprecated_patch(command):
                self._unmatched.popleft()  # histories from before the patch lack its marker
                continue
            raise NonDeterminismError(problem)

    def _check_all_matched(self, next_event: dict[str, Any] | None) -> None:
        while self._unmatched and _is_deprecated_patch(self._unmatched[0]):
            self._unmatched.popleft()
        if self._unmatched and self._matching:
            where = "the history ends" if next_event is None else f"history has {describe_event(next_event)}"
            raise NonDeterminismError(f"the workflow code issues {describe(self._unmatched[0])} "
                                      f"but {where} instead of a matching event")

    @staticmethod
    def _scheduled_id(event: dict[str, Any]) -> Any:
        return (event.get("attributes") or {}).get("scheduled_event_id")


def _is_deprecated_patch(command: Command) -> bool:
    return command["type"] == WorkflowCommandType.RECORD_MARKER and bool((command.get("details") or {}).get("deprecated"))
