"""The signal and query handlers of one run, as Temporal's Python SDK runs them.

Signals arrive as WORKFLOW_EXECUTION_SIGNALED events, on first execution and on every
replay alike, and each starts its handler as a task on the run's event loop, in the
order they were recorded. Signals recorded before the run's first workflow task run
their handlers right after the workflow object is created, before its run method. A
signal no handler takes waits (in order) until one is set with `set_signal_handler` or
a dynamic one exists; whatever still waits when the run ends is dropped with a warning,
as Temporal does.

An update (carried by a workflow task, or on replay by its WORKFLOW_EXECUTION_UPDATE_ACCEPTED
event) starts a task that runs its validator read-only (first execution only: history
holds only accepted updates), then issues ACCEPT_UPDATE, runs the handler and issues
COMPLETE_UPDATE with its result or failure; a validator that raises issues REJECT_UPDATE.

A query runs its handler on the run's current state, in a read-only mode: it may not
issue commands or draw from the run's random generator, since a query must leave the
run exactly as it found it (a cached run carries on from that state). The built-in
query ``__stack_trace`` answers with where each of the run's coroutines waits.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog

from streamproc.activity.failures import failure_from_exception
from streamproc.converter import PayloadEncodingError
from streamproc.exceptions import ApplicationError, FailureError, WorkflowQueryFailedError
from streamproc.protocol.workflow_commands import WorkflowCommandType as CommandType
from streamproc.type_hints import handler_types

if TYPE_CHECKING:
    from streamproc.workflow.runtime import WorkflowRuntime

__all__ = ["WorkflowHandlers", "STACK_TRACE_QUERY"]

log = structlog.get_logger("streamproc.workflow")

#: Temporal's built-in query: the stacks of the workflow's coroutines.
STACK_TRACE_QUERY = "__stack_trace"

Handler = Callable[..., Any]


class WorkflowHandlers:
    def __init__(self, runtime: WorkflowRuntime) -> None:
        self._runtime = runtime
        self._signals: dict[str, Handler] = {}
        self._queries: dict[str, Handler] = {}
        self._dynamic_signal: Handler | None = None
        self._dynamic_query: Handler | None = None
        self._updates: dict[str, tuple[Handler, Handler | None]] = {}
        self._dynamic_update: tuple[Handler, Handler | None] | None = None
        #: Updates that arrived before the workflow object existed: (request, replaying).
        self._waiting_updates: list[tuple[dict[str, Any], bool]] = []
        #: Signals recorded before the workflow object existed, or that no handler took:
        #: (name, input text), decoded by the hints of the handler that takes them.
        self._waiting: list[tuple[str, str | None]] = []
        self._bound = False
        #: Signal handler tasks not finished yet (`workflow.all_handlers_finished`).
        self.running: set[asyncio.Task[Any]] = set()

    # -- the workflow object's own handlers ---------------------------------------------
    def bind(self, workflow: object) -> bool:
        """Register the handlers `workflow`'s class declares; start the signals that were
        waiting for it. True if any handler was started."""
        definition = self._runtime.definition
        self._signals.update({n: getattr(workflow, h.method) for n, h in definition.signals.items()})
        self._queries.update({n: getattr(workflow, h.method) for n, h in definition.queries.items()})
        if definition.dynamic_signal is not None and self._dynamic_signal is None:
            self._dynamic_signal = getattr(workflow, definition.dynamic_signal.method)
        if definition.dynamic_query is not None and self._dynamic_query is None:
            self._dynamic_query = getattr(workflow, definition.dynamic_query.method)
        self._updates.update({n: _with_validator(workflow, h) for n, h in definition.updates.items()})
        if definition.dynamic_update is not None:
            self._dynamic_update = _with_validator(workflow, definition.dynamic_update)
        self._bound = True
        started = self._start_waiting()
        waiting, self._waiting_updates = self._waiting_updates, []
        for request, replaying in waiting:
            self.update(request, replaying)
        return started or bool(waiting)

    # -- signals --------------------------------------------------------------------------
    def signal(self, event: dict[str, Any]) -> None:
        """A WORKFLOW_EXECUTION_SIGNALED event reached the code."""
        attributes = event.get("attributes") or {}
        self._waiting.append((attributes.get("signal_name", ""), attributes.get("input")))
        if self._bound:
            self._start_waiting()

    def set_signal_handler(self, name: str, handler: Handler | None) -> None:
        if handler is None:
            self._signals.pop(name, None)
        else:
            self._signals[name] = handler
            self._start_waiting()

    def set_dynamic_signal_handler(self, handler: Handler | None) -> None:
        self._dynamic_signal = handler
        if handler is not None:
            self._start_waiting()

    def _start_waiting(self) -> bool:
        started = False
        still_waiting = []
        for name, text in self._waiting:
            handler = self._signals.get(name)
            if handler is None and self._dynamic_signal is None:
                still_waiting.append((name, text))
                continue
            hints = handler_types(handler).parameters if handler is not None else ()
            try:
                args = list(self._runtime.converter.decode_args(text, hints))
            except PayloadEncodingError as exc:  # Temporal drops a signal whose arguments it cannot read
                log.warning("workflow_signal_dropped", signal=name, reason=str(exc), **self._where())
                continue
            if handler is not None:
                self._start(f"signal {name}", handler, args)
            else:
                self._start(f"signal {name}", self._dynamic_signal, [name, args])
            started = True
        self._waiting = still_waiting
        return started

    def _start(self, what: str, handler: Handler, args: list[Any]) -> None:
        async def run() -> None:
            result = handler(*args)
            if inspect.isawaitable(result):
                await result

        task = self._runtime.loop.create_task(run(), name=what)
        self.running.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self.running.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self._runtime.handler_failed(task.exception())

    def drop_waiting(self) -> None:
        """The run is over: signals no handler took are dropped, with a warning."""
        for name, _ in self._waiting:
            log.warning("workflow_signal_unhandled", signal=name, **self._where(),
                        hint="no handler took it before the run ended; add @workflow.signal or a dynamic one")
        self._waiting = []

    # -- updates --------------------------------------------------------------------------
    def update(self, request: dict[str, Any], replaying: bool) -> None:
        """An update reached the code: validate (unless replaying), accept, run, complete."""
        if not self._bound:
            self._waiting_updates.append((request, replaying))
            return
        runtime = self._runtime
        update_id, name = request["update_id"], request["name"]
        found = self._updates.get(name)
        dynamic = found is None and self._dynamic_update is not None
        handler, validator = found or self._dynamic_update or (None, None)
        if handler is None:
            known = " ".join(sorted(self._updates))
            runtime.issue({"type": CommandType.REJECT_UPDATE, "update_id": update_id, "failure": failure_from_exception(
                ApplicationError(f"Update handler for {name!r} expected but not found, known updates: [{known}]",
                                 type="NotFoundError"))})
            return
        hints = () if dynamic else handler_types(handler).parameters
        try:
            args = list(runtime.converter.decode_args(request.get("input"), hints))
        except PayloadEncodingError as exc:
            runtime.issue({"type": CommandType.REJECT_UPDATE, "update_id": update_id,
                           "failure": failure_from_exception(ApplicationError(str(exc), type="PayloadEncodingError"))})
            return
        if dynamic:
            args = [name, args]

        async def run() -> None:
            if validator is not None and not replaying:
                try:
                    runtime.read_only(validator, *args)
                except Exception as exc:  # the validator's refusal is the update's rejection
                    runtime.issue({"type": CommandType.REJECT_UPDATE, "update_id": update_id,
                                   "failure": failure_from_exception(exc, converter=runtime.converter)})
                    return
            runtime.issue({"type": CommandType.ACCEPT_UPDATE, "update_id": update_id})
            try:
                result = handler(*args)
                if inspect.isawaitable(result):
                    result = await result
            except FailureError as exc:
                runtime.issue({"type": CommandType.COMPLETE_UPDATE, "update_id": update_id,
                               "failure": failure_from_exception(exc, converter=runtime.converter)})
                return
            runtime.issue({"type": CommandType.COMPLETE_UPDATE, "update_id": update_id,
                           "result": runtime.converter.encode(result)})

        task = runtime.loop.create_task(run(), name=f"update {name} {update_id}")
        self.running.add(task)
        task.add_done_callback(self._finished)

    # -- queries --------------------------------------------------------------------------
    def set_query_handler(self, name: str, handler: Handler | None) -> None:
        if handler is None:
            self._queries.pop(name, None)
        else:
            self._queries[name] = handler

    def set_dynamic_query_handler(self, handler: Handler | None) -> None:
        self._dynamic_query = handler

    def query_parameter_types(self, name: str) -> tuple[Any, ...]:
        """The hints the arguments of query `name` are decoded by (none for a dynamic one)."""
        handler = self._queries.get(name)
        return handler_types(handler).parameters if handler is not None else ()

    def query(self, name: str, args: list[Any]) -> Any:
        """The query handler's answer on the current state; raises WorkflowQueryFailedError."""
        if name == STACK_TRACE_QUERY:
            return self.stack_trace()
        handler = self._queries.get(name)
        if handler is None and self._dynamic_query is not None:
            handler, args = self._dynamic_query, [name, args]
        if handler is None:
            known = sorted([STACK_TRACE_QUERY, *self._queries])
            raise WorkflowQueryFailedError(f"Query handler for {name!r} expected but not found, "
                                           f"known queries: [{' '.join(known)}]")
        return handler(*args)

    def stack_trace(self) -> str:
        """Where each of the run's unfinished coroutines waits, as Temporal's __stack_trace:
        one block per task, outermost call first, down the chain of awaits."""
        blocks = []
        tasks = [t for t in asyncio.all_tasks(self._runtime.loop)
                 if not t.done() and not t.get_name().startswith("query ")]
        for task in sorted(tasks, key=lambda t: t.get_name()):
            lines = [f"{task.get_name()}:"]
            awaited: Any = task.get_coro()
            while awaited is not None and (frame := getattr(awaited, "cr_frame", None)
                                           or getattr(awaited, "gi_frame", None)) is not None:
                lines.append(f'  File "{frame.f_code.co_filename}", line {frame.f_lineno}, in {frame.f_code.co_name}')
                awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None)
            blocks.append("\n".join(lines))
        return "\n\n".join(blocks)

    def _where(self) -> dict[str, str]:  # noqa: D401 - log context
        info = self._runtime.info
        return {"workflow_id": info.workflow_id, "run_id": info.run_id}


def _with_validator(workflow: object, handler: Any) -> tuple[Handler, Handler | None]:
    return (getattr(workflow, handler.method),
            getattr(workflow, handler.validator) if handler.validator is not None else None)
