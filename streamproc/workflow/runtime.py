"""The state of one running workflow: the object every ``workflow.*`` call talks to.

A `WorkflowRuntime` owns the run's event loop, the commands issued during the current
activation, and what is still open (activities, timers, wait conditions). The instance
(`streamproc.workflow.instance`) feeds it one activation at a time: the events that
resolve what is open, the activation's time, and whether the code is replaying. Ids of
activities and timers come from one per-run sequence ("1", "2", ...), so a replay
issues the same ids.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import random
import uuid
from collections.abc import Callable
from typing import Any

from streamproc.activity import errors
from streamproc.activity.failures import failure_from_exception
from streamproc.converter import DataConverter, PayloadEncodingError
from streamproc.exceptions import WorkflowQueryFailedError
from streamproc.protocol.workflow_commands import WorkflowCommandType as CommandType
from streamproc.semantics.workflow_events import EventType
from streamproc.workflow.activity_outcomes import ACTIVITY_CLOSE_EVENTS, activity_error, activity_result
from streamproc.workflow.commands import PATCH_MARKER, Command
from streamproc.workflow.definition import WorkflowDefinition
from streamproc.workflow.errors import ContinueAsNewError, ReadOnlyContextError
from streamproc.workflow.event_loop import WorkflowEventLoop
from streamproc.workflow.children import ChildWorkflows
from streamproc.workflow.current import current_runtime
from streamproc.workflow.handlers import WorkflowHandlers
from streamproc.workflow.local_activity_state import LocalActivities
from streamproc.workflow.run_info import Info

__all__ = ["WorkflowRuntime", "OpenActivity", "OpenTimer", "current_runtime"]  # current_runtime: workflow/current.py

_E = EventType


@dataclasses.dataclass(slots=True, eq=False)
class OpenActivity:
    """An activity the code scheduled and whose close event has not been delivered."""

    activity_id: str
    activity_type: str
    future: asyncio.Future[Any]
    command: Command
    scheduled_event_id: int | None = None  # known once the engine recorded the command
    cancel_requested: bool = False
    result_type: Any = None  # the type hint its result is decoded as


@dataclasses.dataclass(slots=True, eq=False)
class OpenTimer:
    timer_id: str
    future: asyncio.Future[None]
    command: Command
    recorded: bool = False  # TimerStarted is in history


class WorkflowRuntime:
    def __init__(self, definition: WorkflowDefinition, started_event: dict[str, Any],
                 run_id: str | None = None, converter: DataConverter | None = None, *,
                 namespace: str = "") -> None:
        self.definition = definition
        self.info = Info.from_started_event(started_event, run_id, namespace)
        #: WORKFLOW_EXECUTION_STARTED's attributes (what the previous run passed on: `last_run`).
        self.started_attributes: dict[str, Any] = started_event.get("attributes") or {}
        self.converter = converter or DataConverter.default()
        # Decoded when the code starts, so input it cannot decode fails the task.
        self._input = (started_event.get("attributes") or {}).get("input")
        self.loop = WorkflowEventLoop(self, lambda: self.now_ms / 1000)
        self._now_ms = started_event.get("event_time_ms", 0)
        #: Whether the code read the task's time since the activation began (`now_ms`): a
        #: task run before the engine scheduled it (`instance.speculate`) must not have.
        self.time_read = False
        self.replaying = False
        self.cancel_requested = False
        seed = hashlib.sha256(f"{self.info.workflow_id}/{self.info.run_id}".encode()).digest()
        self.random = random.Random(int.from_bytes(seed[:8], "big"))
        self._sequence = 0
        self._commands: list[Command] = []
        self._close: Command | None = None
        #: What workflow code raised that is not a workflow failure: fails the task.
        self.task_failure: BaseException | None = None
        self._main: asyncio.Task[Any] | None = None
        self._activities: dict[str, OpenActivity] = {}
        self._activities_by_event: dict[int, OpenActivity] = {}
        self._timers: dict[str, OpenTimer] = {}
        self._conditions: list[tuple[Callable[[], bool], asyncio.Future[None]]] = []
        self._patches: dict[str, bool] = {}
        self._patches_recorded: frozenset[str] = frozenset()
        self.handlers = WorkflowHandlers(self)
        self.children = ChildWorkflows(self)
        self.local_activities = LocalActivities(self)
        #: Set while a query runs: the run's state may be read, not changed.
        self._read_only = False

    @property
    def now_ms(self) -> int:
        """The task's time (its WORKFLOW_TASK_SCHEDULED's), as every time-based API reads it."""
        self.time_read = True
        return self._now_ms

    # -- driven by the instance -----------------------------------------------------------
    def activate(self, resolutions: list[dict[str, Any]], now_ms: int, replaying: bool,
                 patches_recorded: frozenset[str], updates: list[dict[str, Any]] = (),
                 local_markers: list[dict[str, Any]] = ()) -> list[Command]:
        """Deliver `resolutions` and `updates`, run the code until it blocks, return the
        commands issued. `local_markers`: the local activity markers the replayed task recorded
        (or, live, the markers the engine keeps journaled for it)."""
        self._now_ms = now_ms
        self.time_read = False
        self.replaying = replaying
        self._patches_recorded = patches_recorded
        self.local_activities.offer_markers(list(local_markers), live=not replaying)
        self._commands = []
        if self._main is None:
            self._main = self.loop.create_task(self._run_workflow(), name="workflow run")
            self._main.add_done_callback(self._on_main_done)
        # Signals first, in the order recorded, then what resolves activities and timers,
        # as Temporal orders an activation's jobs.
        for event in resolutions:
            if event["event_type"] == _E.WORKFLOW_EXECUTION_SIGNALED.name:
                self.handlers.signal(event)
        for request in updates:
            self.handlers.update(request, replaying)
        for event in resolutions:
            self._resolve(event)
        return self._run_until_idle()

    def resolve_local_activity(self, seq: str, details: dict[str, Any]) -> list[Command]:
        """First execution: a local activity's outcome, from the worker; the code runs on
        until it blocks again. Returns all the commands of the task so far."""
        self.local_activities.resolve(seq, details)
        return self._run_until_idle()

    def _run_until_idle(self) -> list[Command]:
        self.loop.run_until_idle(self._on_idle)
        if self._close is not None:
            self.handlers.drop_waiting()
        return self._commands + ([self._close] if self._close is not None else [])

    def _on_idle(self) -> bool:
        # Replay resolves local activities from their markers where first execution had
        # to wait for the worker: once nothing else can run. So does a live task from the
        # markers journaled by an attempt before it (none are offered otherwise).
        return self._check_conditions() or self.local_activities.resolve_recorded()

    def query(self, name: str, args: list[Any]) -> Any:
        """Run the query handler `name` on the run's state as it is now, read-only."""
        outcome: list[Any] = []

        async def run() -> None:
            outcome.append(self.handlers.query(name, args))

        self._read_only = True
        try:
            task = self.loop.create_task(run(), name=f"query {name}")
            self.loop.run_until_idle()
        finally:
            self._read_only = False
        if not task.done():
            task.cancel()
            self.loop.run_until_idle()
            raise WorkflowQueryFailedError(f"query handler {name!r} did not return at once: a query may not wait")
        task.result()  # what the handler raised
        return outcome[0]

    def issue(self, command: Command) -> None:
        """A command from a handler (an update's outcome): in order with the code's others."""
        self._add(command)

    def issue_command(self, command: Command, action: str) -> None:
        """A command from workflow code (a child's start, a signal to another workflow)."""
        self.assert_writable(action)
        self._add(command)

    def read_only(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Call `fn` (a validator) unable to change the run."""
        self._read_only = True
        try:
            return fn(*args)
        finally:
            self._read_only = False

    def assert_writable(self, action: str) -> None:
        """Raise ReadOnlyContextError while a query runs (Temporal's message)."""
        if self._read_only:
            raise ReadOnlyContextError(f"While in read-only function, action attempted: {action}")

    def handler_failed(self, error: BaseException) -> None:
        """A signal handler raised: a workflow failure fails the run, anything else the task."""
        if isinstance(error, asyncio.CancelledError):
            return
        self._end_with(error)

    @property
    def closed(self) -> bool:
        return self._close is not None

    @property
    def started(self) -> bool:
        """Whether the workflow code has run (its first workflow task was activated)."""
        return self._main is not None

    def command_recorded(self, command: Command, event: dict[str, Any]) -> None:
        """The engine recorded `command` as `event`: remember the event id close events use."""
        self.children.command_recorded(command, event)
        if command["type"] == CommandType.SCHEDULE_ACTIVITY_TASK:
            activity = self._activities.get(command["activity_id"])
            if activity is not None:
                activity.scheduled_event_id = event["event_id"]
                self._activities_by_event[event["event_id"]] = activity
        elif command["type"] == CommandType.START_TIMER:
            timer = self._timers.get(command["timer_id"])
            if timer is not None:
                timer.recorded = True

    def discard(self) -> None:
        """Drop the run's pending coroutines (the instance replays from scratch)."""
        self.loop.close()

    # -- called by workflow code ----------------------------------------------------------
    def schedule_activity(self, command: Command, activity_id: str | None,
                          result_type: Any = None) -> OpenActivity:
        self.assert_writable("start activity")
        activity_id = activity_id or self.next_id()
        command = {"type": CommandType.SCHEDULE_ACTIVITY_TASK, "activity_id": activity_id, **command}
        activity = OpenActivity(activity_id, command["activity_type"], self.loop.create_future(), command,
                                result_type=result_type)
        self._activities[activity_id] = activity
        self._add(command)
        return activity

    def request_cancel_activity(self, activity: OpenActivity) -> bool:
        """Ask the engine to cancel `activity`; False if there is nothing to wait for
        (it closed already, or was never sent and is now dropped)."""
        self.assert_writable("cancel activity")
        if activity.future.done():
            return False
        if activity.command in self._commands and activity.scheduled_event_id is None:
            # Scheduled and cancelled in the same activation: the engine never hears of it.
            self._commands.remove(activity.command)
            del self._activities[activity.activity_id]
            activity.future.cancel()
            return False
        if not activity.cancel_requested:
            activity.cancel_requested = True
            self._add({"type": CommandType.REQUEST_CANCEL_ACTIVITY_TASK,
                       "scheduled_event_id": activity.scheduled_event_id})
        return True

    def start_timer(self, duration_ms: int) -> OpenTimer:
        self.assert_writable("start timer")
        timer_id = self.next_id()
        command = {"type": CommandType.START_TIMER, "timer_id": timer_id, "start_to_fire_timeout_ms": duration_ms}
        timer = OpenTimer(timer_id, self.loop.create_future(), command)
        self._timers[timer_id] = timer
        self._add(command)
        return timer

    def cancel_timer(self, timer: OpenTimer) -> None:
        if self._timers.pop(timer.timer_id, None) is None:
            return  # fired already: nothing to cancel
        if not timer.future.done():
            timer.future.cancel()
        if timer.command in self._commands and not timer.recorded:
            self._commands.remove(timer.command)  # never sent
        else:
            self._add({"type": CommandType.CANCEL_TIMER, "timer_id": timer.timer_id})

    def add_condition(self, predicate: Callable[[], bool]) -> asyncio.Future[None]:
        future: asyncio.Future[None] = self.loop.create_future()
        self._conditions.append((predicate, future))
        return future

    def remove_condition(self, future: asyncio.Future[None]) -> None:
        self._conditions = [(p, f) for p, f in self._conditions if f is not future]

    def patched(self, patch_id: str, *, deprecated: bool) -> bool:
        """Temporal's rule: new code paths run on first execution (and record a marker);
        on replay only where the marker was recorded. Memoised per run."""
        self.assert_writable("patch")
        if patch_id in self._patches:
            return self._patches[patch_id]
        use = not self.replaying or patch_id in self._patches_recorded
        self._patches[patch_id] = use
        if use:
            details: dict[str, Any] = {"patch_id": patch_id}
            if deprecated:
                details["deprecated"] = True
            self._add({"type": CommandType.RECORD_MARKER, "marker_name": PATCH_MARKER, "details": details})
        return use

    def uuid4(self) -> uuid.UUID:
        self.assert_writable("uuid4")
        return uuid.UUID(int=self.random.getrandbits(128), version=4)

    # -- internals ------------------------------------------------------------------------
    def peek_id(self) -> str:
        """The id the next activity or timer will get (for error messages)."""
        return str(self._sequence + 1)

    def next_id(self) -> str:
        """The run's next sequence number: the id of an activity, timer or local activity call."""
        self._sequence += 1
        return str(self._sequence)

    def _add(self, command: Command) -> None:
        # Once the run has decided how it ends, what other coroutines do is moot.
        if self._close is None:
            self._commands.append(command)

    async def _run_workflow(self) -> Any:
        workflow = self.definition.cls()
        if self.handlers.bind(workflow):
            await asyncio.sleep(0)  # signals recorded before the first task run before the run method
        return await getattr(workflow, self.definition.run_method)(
            *self.converter.decode_args(self._input, self.definition.run_types().parameters))

    def _on_main_done(self, main: asyncio.Task[Any]) -> None:
        error: BaseException | None
        error = asyncio.CancelledError() if main.cancelled() else main.exception()
        if error is None:
            try:
                self._close = {"type": CommandType.COMPLETE_WORKFLOW_EXECUTION, "result": self.converter.encode(main.result())}
            except TypeError as exc:
                self.task_failure = exc
        else:
            self._end_with(error)

    def _end_with(self, error: BaseException) -> None:
        """How an exception out of workflow code ends the run (or fails the task)."""
        if self._close is not None:
            return
        if isinstance(error, ContinueAsNewError):
            self._close = {
                "type": CommandType.CONTINUE_AS_NEW_WORKFLOW_EXECUTION,
                "workflow_type": error.workflow_type or self.info.workflow_type,
                "task_queue": error.task_queue or self.info.task_queue,
                "input": self.converter.encode_args(error.input_args),
                "workflow_run_timeout_ms": error.run_timeout_ms,
                "workflow_task_timeout_ms": error.task_timeout_ms}
        elif self.cancel_requested and _is_cancellation(error):
            self._close = {"type": CommandType.CANCEL_WORKFLOW_EXECUTION, "details": None}
        elif isinstance(error, errors.FailureError):
            self._close = {"type": CommandType.FAIL_WORKFLOW_EXECUTION, "failure": failure_from_exception(error, converter=self.converter)}
        else:
            self.task_failure = error

    def _resolve(self, event: dict[str, Any]) -> None:
        kind = event["event_type"]
        attributes = event.get("attributes") or {}
        if self.children.resolve(event):
            return
        if kind in ACTIVITY_CLOSE_EVENTS:
            activity = self._activities_by_event.pop(attributes.get("scheduled_event_id"), None)
            if activity is None or activity.future.done():
                return
            self._activities.pop(activity.activity_id, None)
            if kind == _E.ACTIVITY_TASK_COMPLETED.name:
                try:
                    activity.future.set_result(activity_result(event, self.converter, activity.result_type))
                except PayloadEncodingError as exc:  # a result this worker cannot read fails the task
                    self.task_failure = exc
            else:
                activity.future.set_exception(activity_error(
                    event, activity_id=activity.activity_id, activity_type=activity.activity_type,
                    converter=self.converter))
        elif kind == _E.TIMER_FIRED.name:
            timer = self._timers.pop(attributes.get("timer_id"), None)
            if timer is not None and not timer.future.done():
                timer.future.set_result(None)
        elif kind == _E.WORKFLOW_EXECUTION_CANCEL_REQUESTED.name:
            if not self.cancel_requested:
                self.cancel_requested = True
                if self._main is not None:
                    self._main.cancel()
        # Anything else (activity started, a cancel request's echo ...) changes nothing
        # the code waits on.

    def _check_conditions(self) -> bool:
        woke = False
        for predicate, future in list(self._conditions):
            if future.done():
                continue
            try:
                satisfied = predicate()
            except Exception as exc:  # the waiting code sees what its predicate raised
                future.set_exception(exc)
                woke = True
                continue
            if satisfied:
                future.set_result(None)
                woke = True
        self._conditions = [(p, f) for p, f in self._conditions if not f.done()]
        return woke


def _is_cancellation(error: BaseException) -> bool:
    """The run ended because it was cancelled: asyncio's CancelledError, or an activity
    error that a cancellation caused (an activity awaited until its cancel completed)."""
    if isinstance(error, (asyncio.CancelledError, errors.CancelledError)):
        return True
    return isinstance(error, errors.ActivityError) and isinstance(error.cause, errors.CancelledError)
