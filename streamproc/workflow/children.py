"""Child workflows and other workflows, from workflow code, as in Temporal's SDK:
`workflow.start_child_workflow` / `execute_child_workflow` and
`workflow.get_external_workflow_handle`.

Starting a child issues START_CHILD_WORKFLOW_EXECUTION; the start completes when history
delivers CHILD_WORKFLOW_EXECUTION_STARTED (or raises WorkflowAlreadyStartedError on
START_CHILD_WORKFLOW_EXECUTION_FAILED), and the child's result when its close event
arrives (a ChildWorkflowError whose cause says how it ended, unless it completed). A
signal or a cancel request to another workflow issues SIGNAL_EXTERNAL / REQUEST_CANCEL_
EXTERNAL and completes when the engine reports that it reached the target (or raises
ApplicationError when the target was not found). Each future is found again on replay
through the event id of the command's initiated event.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from datetime import timedelta
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from streamproc.activity.failures import exception_from_failure
from streamproc.call_arguments import NO_ARG, call_arguments
from streamproc.converter import PayloadEncodingError
from streamproc.exceptions import (
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
    TerminatedError,
    TimeoutError,
    WorkflowAlreadyStartedError,
)
from streamproc.protocol.wire_values import ceil_ms, retry_policy_record
from streamproc.protocol.workflow_commands import WorkflowCommandType as CommandType
from streamproc.semantics import RetryPolicy, RetryState, TimeoutType
from streamproc.semantics.workflow_events import EventType
from streamproc.semantics.workflow_ids import WorkflowIdReusePolicy
from streamproc.workflow.current import current_runtime
from streamproc.workflow.definition import result_type_of, signal_name_of, workflow_type_of

if TYPE_CHECKING:
    from streamproc.workflow.runtime import WorkflowRuntime

__all__ = ["ParentClosePolicy", "ChildWorkflowHandle", "ExternalWorkflowHandle", "start_child_workflow",
           "execute_child_workflow", "get_external_workflow_handle", "get_external_workflow_handle_for", "ChildWorkflows"]

_E = EventType
_CHILD_CLOSES = {_E.CHILD_WORKFLOW_EXECUTION_COMPLETED.name, _E.CHILD_WORKFLOW_EXECUTION_FAILED.name,
                 _E.CHILD_WORKFLOW_EXECUTION_CANCELED.name, _E.CHILD_WORKFLOW_EXECUTION_TIMED_OUT.name,
                 _E.CHILD_WORKFLOW_EXECUTION_TERMINATED.name}
_EXTERNAL_ANSWERS = {_E.EXTERNAL_WORKFLOW_EXECUTION_SIGNALED.name: None,
                     _E.SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_FAILED.name: "signal",
                     _E.EXTERNAL_WORKFLOW_EXECUTION_CANCEL_REQUESTED.name: None,
                     _E.REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_FAILED.name: "cancel"}


class ParentClosePolicy(IntEnum):
    """What happens to a child when its parent closes (Temporal's numbers)."""

    UNSPECIFIED = 0
    TERMINATE = 1
    ABANDON = 2
    REQUEST_CANCEL = 3


@dataclasses.dataclass(slots=True, eq=False)
class _Child:
    workflow_id: str
    workflow_type: str
    started: asyncio.Future[str]
    result: asyncio.Future[Any]
    result_type: Any = None  # the type hint its result is decoded as


class ChildWorkflowHandle:
    """A started child: await it for its result; signal or cancel it."""

    def __init__(self, child: _Child, run_id: str) -> None:
        self.id = child.workflow_id
        self.first_execution_run_id = run_id
        self._child = child

    def __await__(self):
        return self._child.result.__await__()

    async def signal(self, signal: str | Callable[..., Any], arg: Any = NO_ARG, *, args: Sequence[Any] = ()) -> None:
        await current_runtime().children.signal(self.id, "", signal, call_arguments(arg, args), child_only=True)

    async def cancel(self) -> None:
        """Ask the child to cancel (its code decides what that means)."""
        await current_runtime().children.cancel(self.id, "", child_only=True)


class ExternalWorkflowHandle:
    """Another workflow, by id (and run id, or its current run)."""

    def __init__(self, workflow_id: str, run_id: str | None) -> None:
        self.id = workflow_id
        self.run_id = run_id

    async def signal(self, signal: str | Callable[..., Any], arg: Any = NO_ARG, *, args: Sequence[Any] = ()) -> None:
        await current_runtime().children.signal(self.id, self.run_id or "", signal, call_arguments(arg, args),
                                                child_only=False)

    async def cancel(self) -> None:
        await current_runtime().children.cancel(self.id, self.run_id or "", child_only=False)


async def start_child_workflow(workflow: str | Callable[..., Any], arg: Any = NO_ARG, *, id: str,
                               args: Sequence[Any] = (), task_queue: str | None = None,
                               execution_timeout: timedelta | None = None, run_timeout: timedelta | None = None,
                               task_timeout: timedelta | None = None, retry_policy: RetryPolicy | None = None,
                               id_reuse_policy: WorkflowIdReusePolicy = WorkflowIdReusePolicy.ALLOW_DUPLICATE,
                               parent_close_policy: ParentClosePolicy = ParentClosePolicy.TERMINATE,
                               cron_schedule: str = "", result_type: Any = None) -> ChildWorkflowHandle:
    """Start a child workflow (``Child.run``, the class, or the type name); returns once it
    started. Raises WorkflowAlreadyStartedError when its id is taken. Its task queue is
    this workflow's unless given. With `cron_schedule` the child is a cron workflow: its
    result (and this workflow's wait for it) comes when its chain of runs ends. The result
    is decoded as `result_type`, by default the run method's return annotation."""
    runtime = current_runtime()
    workflow_type = workflow_type_of(workflow)
    reuse = WorkflowIdReusePolicy(id_reuse_policy)
    command = {
        "type": CommandType.START_CHILD_WORKFLOW_EXECUTION, "workflow_id": id, "workflow_type": workflow_type,
        "task_queue": task_queue or "", "input": runtime.converter.encode_args(call_arguments(arg, args)),
        "workflow_execution_timeout_ms": _ms(execution_timeout), "workflow_run_timeout_ms": _ms(run_timeout),
        "workflow_task_timeout_ms": _ms(task_timeout),
        "retry_policy": None if retry_policy is None else retry_policy_record(retry_policy),
        "workflow_id_reuse_policy": "" if reuse is WorkflowIdReusePolicy.UNSPECIFIED else reuse.name,
        "parent_close_policy": ParentClosePolicy(parent_close_policy or ParentClosePolicy.TERMINATE).name,
        **({"cron_schedule": cron_schedule} if cron_schedule else {})}
    child = runtime.children.start(command, result_type if result_type is not None else result_type_of(workflow))
    run_id = await child.started
    return ChildWorkflowHandle(child, run_id)


async def execute_child_workflow(workflow: str | Callable[..., Any], arg: Any = NO_ARG, **options: Any) -> Any:
    """Start a child workflow and wait for its result (ChildWorkflowError if it did not complete)."""
    return await (await start_child_workflow(workflow, arg, **options))


def get_external_workflow_handle(workflow_id: str, *, run_id: str | None = None) -> ExternalWorkflowHandle:
    """A handle to signal or cancel another workflow (any partition)."""
    current_runtime()
    return ExternalWorkflowHandle(workflow_id, run_id)


def get_external_workflow_handle_for(workflow: Any, workflow_id: str, *,
                                     run_id: str | None = None) -> ExternalWorkflowHandle:
    """Temporal's typed form of `get_external_workflow_handle`: `workflow` (its run method or
    class) only types the handle in Temporal; here it is the same handle."""
    return get_external_workflow_handle(workflow_id, run_id=run_id)


class ChildWorkflows:
    """The run's children and its requests to other workflows: commands out, events in."""

    def __init__(self, runtime: WorkflowRuntime) -> None:
        self._runtime = runtime
        #: Futures of commands whose initiated event is not known yet, by command identity.
        self._by_command: dict[int, Any] = {}
        self._children: dict[int, _Child] = {}
        self._requests: dict[int, tuple[asyncio.Future[None], str]] = {}

    def start(self, command: dict[str, Any], result_type: Any = None) -> _Child:
        loop = self._runtime.loop
        child = _Child(command["workflow_id"], command["workflow_type"], loop.create_future(), loop.create_future(),
                       result_type)
        self._runtime.issue_command(command, "start child workflow")
        self._by_command[id(command)] = child
        return child

    async def signal(self, workflow_id: str, run_id: str, signal: Any, args: list[Any], *, child_only: bool) -> None:
        await self._request({"type": CommandType.SIGNAL_EXTERNAL_WORKFLOW_EXECUTION, "workflow_id": workflow_id,
                             "run_id": run_id, "signal_name": signal_name_of(signal),
                             "input": self._runtime.converter.encode_args(args), "child_workflow_only": child_only},
                            workflow_id)

    async def cancel(self, workflow_id: str, run_id: str, *, child_only: bool) -> None:
        await self._request({"type": CommandType.REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION,
                             "workflow_id": workflow_id, "run_id": run_id, "child_workflow_only": child_only},
                            workflow_id)

    async def _request(self, command: dict[str, Any], workflow_id: str) -> None:
        future: asyncio.Future[None] = self._runtime.loop.create_future()
        self._runtime.issue_command(command, "signal or cancel external workflow")
        self._by_command[id(command)] = (future, workflow_id)
        await future

    def command_recorded(self, command: dict[str, Any], event: dict[str, Any]) -> None:
        waiting = self._by_command.pop(id(command), None)
        if isinstance(waiting, _Child):
            self._children[event["event_id"]] = waiting
        elif waiting is not None:
            self._requests[event["event_id"]] = waiting

    def resolve(self, event: dict[str, Any]) -> bool:
        """Deliver a child's or an external request's event; False if it is neither."""
        kind = event["event_type"]
        attributes = event.get("attributes") or {}
        initiated = attributes.get("initiated_event_id")
        if kind in _EXTERNAL_ANSWERS:
            future, workflow_id = self._requests.pop(initiated, (None, ""))
            if future is not None and not future.done():
                what = _EXTERNAL_ANSWERS[kind]
                if what is None:
                    future.set_result(None)
                else:
                    future.set_exception(ApplicationError(
                        f"Unable to {what} external workflow because it was not found",
                        type="ExternalWorkflowExecutionNotFound", non_retryable=True))
            return True
        child = self._children.get(initiated)
        if kind == _E.START_CHILD_WORKFLOW_EXECUTION_FAILED.name:
            self._children.pop(initiated, None)
            if child is not None and not child.started.done():
                child.started.set_exception(WorkflowAlreadyStartedError(
                    "Workflow execution already started", workflow_id=child.workflow_id,
                    workflow_type=child.workflow_type))
            return True
        if kind == _E.CHILD_WORKFLOW_EXECUTION_STARTED.name:
            if child is not None and not child.started.done():
                child.started.set_result((attributes.get("workflow_execution") or {}).get("run_id", ""))
            return True
        if kind in _CHILD_CLOSES:
            self._children.pop(initiated, None)
            if child is not None and not child.result.done():
                self._close(child, kind, attributes)
            return True
        return False

    def _close(self, child: _Child, kind: str, a: dict[str, Any]) -> None:
        converter = self._runtime.converter
        if kind == _E.CHILD_WORKFLOW_EXECUTION_COMPLETED.name:
            try:
                child.result.set_result(converter.decode(a.get("result"), child.result_type))
            except PayloadEncodingError as exc:  # a result this worker cannot read fails the task
                self._runtime.task_failure = exc
            return
        if kind == _E.CHILD_WORKFLOW_EXECUTION_FAILED.name:
            cause = exception_from_failure(a.get("failure"), converter=converter)
        elif kind == _E.CHILD_WORKFLOW_EXECUTION_CANCELED.name:
            cause = CancelledError("Child workflow cancelled", *converter.decode_details(a.get("details")))
        elif kind == _E.CHILD_WORKFLOW_EXECUTION_TIMED_OUT.name:
            cause = TimeoutError("Child workflow timed out", type=TimeoutType.START_TO_CLOSE)
        else:
            cause = TerminatedError("Child workflow terminated")
        retry_state = a.get("retry_state")
        error = ChildWorkflowError("Child Workflow execution failed", workflow_id=child.workflow_id,
                                   run_id=(a.get("workflow_execution") or {}).get("run_id", ""),
                                   workflow_type=child.workflow_type,
                                   retry_state=RetryState[retry_state] if retry_state else None)
        error.__cause__ = cause
        child.result.set_exception(error)



def _ms(value: timedelta | None) -> int:
    return 0 if value is None else ceil_ms(value)
