"""What a workflow worker answers to one task: the pure part, testable without a broker.

A task is answered with one command about the run's key: TASK_COMPLETE with the
commands the workflow code issued, or TASK_FAIL with a failure and a cause (the code no
longer matches its history, the code raised something that is not a workflow failure,
or no workflow of that type is registered here). The run's instance comes from the
sticky cache when the history continues what it last saw, else from a full replay.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

import orjson
import structlog

from streamproc.activity import errors
from streamproc.activity.failures import failure_from_exception
from streamproc.protocol.records import Record, ValueType, WorkflowIntent
from streamproc.worker.sticky_cache import StickyCache
from streamproc.worker.workflow_task_pages import WorkflowTask

__all__ = ["WorkflowTaskHandler", "UNHANDLED_FAILURE", "CLOSE_COMMANDS"]

log = structlog.get_logger("streamproc.worker")

#: WorkflowTaskFailedCause of a task the worker could not run (Temporal's name).
UNHANDLED_FAILURE = "WORKFLOW_WORKER_UNHANDLED_FAILURE"
#: Commands after which the run is closed: its instance is not worth keeping.
CLOSE_COMMANDS = frozenset({"COMPLETE_WORKFLOW_EXECUTION", "FAIL_WORKFLOW_EXECUTION",
                            "CANCEL_WORKFLOW_EXECUTION", "CONTINUE_AS_NEW_WORKFLOW_EXECUTION"})


class Instance(Protocol):
    """The part of `streamproc.workflow.instance.WorkflowInstance` a worker uses."""

    def activate(self) -> Any: ...

    def extend(self, events: list[dict[str, Any]]) -> None: ...


#: Builds a run's instance from its definition, whole history and run id (a full replay follows).
InstanceFactory = Callable[[Any, list[dict[str, Any]], str], Instance]


class WorkflowTaskHandler:
    def __init__(self, definitions: Mapping[str, Any], identity: str, new_instance: InstanceFactory,
                 cache: StickyCache[Instance]) -> None:
        self.definitions = definitions
        self.identity = identity
        self.new_instance = new_instance
        self.cache = cache

    def answer(self, task: WorkflowTask) -> Record:
        """TASK_COMPLETE or TASK_FAIL for `task`; never raises for what the code does."""
        definition = self.definitions.get(task.workflow_type)
        if definition is None:
            self.cache.evict(task.run_id)
            return self._fail(task, UNHANDLED_FAILURE, failure_from_exception(errors.ApplicationError(
                f"Workflow class {task.workflow_type} is not registered on this worker, available "
                f"workflows: {', '.join(sorted(self.definitions)) or '(none)'}", type="NotFoundError")))
        try:
            instance = self._instance_for(task, definition)
            outcome = instance.activate()
        except Exception as exc:  # a runtime bug fails this task, never the worker
            log.exception("workflow_activation_crashed", workflow_id=task.workflow_id, run_id=task.run_id)
            self.cache.evict(task.run_id)
            return self._fail(task, UNHANDLED_FAILURE, failure_from_exception(exc))
        commands = getattr(outcome, "commands", None)
        if getattr(outcome, "failure", None) is not None or commands is None:
            # The instance may have run ahead of the history the engine will keep.
            self.cache.evict(task.run_id)
            return self._fail(task, getattr(outcome, "cause", None) or UNHANDLED_FAILURE,
                              _failure_record(getattr(outcome, "failure", None)))
        if any(c.get("type") in CLOSE_COMMANDS for c in commands):
            self.cache.evict(task.run_id)
        else:
            self.cache.keep(task, instance)
        return self._command(task, WorkflowIntent.TASK_COMPLETE,
                             commands=orjson.dumps(commands).decode())

    def _instance_for(self, task: WorkflowTask, definition: Any) -> Instance:
        cached = self.cache.take(task)
        if cached is not None:
            instance, new_events = cached
            instance.extend(new_events)
            return instance
        return self.new_instance(definition, task.history, task.run_id)

    def _fail(self, task: WorkflowTask, cause: str, failure: dict[str, Any]) -> Record:
        log.warning("workflow_task_failing", workflow_id=task.workflow_id, run_id=task.run_id,
                    scheduled_event_id=task.scheduled_event_id, attempt=task.attempt, cause=cause,
                    message=failure.get("message"))
        return self._command(task, WorkflowIntent.TASK_FAIL, cause=cause, failure=failure)

    def _command(self, task: WorkflowTask, intent: str, **value: Any) -> Record:
        return Record.command(ValueType.WORKFLOW, intent, {
            "workflow_id": task.workflow_id, "run_id": task.run_id,
            "scheduled_event_id": task.scheduled_event_id, "attempt": task.attempt,
            "identity": self.identity, **value},
            key=task.key)


def _failure_record(failure: Any) -> dict[str, Any]:
    """A FailureRecord from what the runtime reports: a record already, or an exception."""
    if isinstance(failure, dict):
        return failure
    if isinstance(failure, BaseException):
        return failure_from_exception(failure)
    return failure_from_exception(errors.ApplicationError(str(failure) or "workflow task failed"))
