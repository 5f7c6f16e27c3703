"""What a workflow worker answers to one task: the pure part, testable without a broker.

A task is answered with one command about the run's key: TASK_COMPLETE with the
commands the workflow code issued, or TASK_FAIL with a failure and a cause (the code no
longer matches its history, the code raised something that is not a workflow failure,
or no workflow of that type is registered here). Only a task's first attempt reports its
failure: a retried attempt that fails again is not answered, so the engine's task timeout
paces the retries (as Temporal's SDKs do). The run's instance comes from the
sticky cache when the history continues what it last saw, else from a full replay. A
task that carries only the history after the run's previous completed task
(`first_event_id` > 1) and finds no cached instance to continue gets the rest with
`fetch_history` (GET_HISTORY); if that fails, the task fails, and the engine sends the
whole history with the next attempt.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import orjson
import structlog

from streamproc.activity import errors
from streamproc.activity.failures import failure_from_exception
from streamproc.protocol.records import Record, ValueType, WorkflowIntent
from streamproc.worker.eager_activities import LISTEN_S as EAGER_LISTEN_S
from streamproc.worker.sticky_cache import StickyCache
from streamproc.worker.workflow_task_pages import WorkflowTask
from streamproc.protocol.workflow_commands import CLOSE_COMMANDS

if TYPE_CHECKING:
    from streamproc.worker.eager_activities import EagerActivities
    from streamproc.worker.handed_tasks import HandedTasks
    from streamproc.worker.marker_journal import MarkerJournal

__all__ = ["WorkflowTaskHandler", "HistoryUnavailable", "UNHANDLED_FAILURE", "not_registered"]

log = structlog.get_logger("streamproc.worker")

#: WorkflowTaskFailedCause of a task the worker could not run (Temporal's name).
UNHANDLED_FAILURE = "WORKFLOW_WORKER_UNHANDLED_FAILURE"


def not_registered(workflow_type: str, definitions: Mapping[str, Any]) -> str:
    """What a task or a query of a workflow type this worker does not run is told (Temporal's words)."""
    return (f"Workflow class {workflow_type} is not registered on this worker, available workflows: "
            f"{', '.join(sorted(definitions)) or '(none)'}")


class Instance(Protocol):
    """The part of `streamproc.workflow.instance.WorkflowInstance` a worker uses."""

    def activate(self, wait: bool = True) -> Any: ...

    def extend(self, events: list[dict[str, Any]]) -> None: ...

    def offer_updates(self, updates: list[dict[str, Any]]) -> None: ...


#: Builds a run's instance from its definition, whole history and run id (a full replay follows).
InstanceFactory = Callable[[Any, list[dict[str, Any]], str], Instance]
#: The run's history as the engine has it now (GET_HISTORY), for a task that lacks its start.
HistoryFetcher = Callable[[WorkflowTask], list[dict[str, Any]]]


@dataclasses.dataclass(eq=False)
class PendingAnswer:
    """A task whose code waits on local activities: `WorkflowTaskHandler.resume` it once
    one of `jobs()` is done, or at `heartbeat_at()`."""

    task: WorkflowTask
    instance: Any

    def jobs(self) -> list[concurrent.futures.Future[Any]]:
        return self.instance.local_activity_jobs()

    def ready(self) -> bool:
        """Whether resuming it now gets anywhere (see `LiveLocalActivities.ready`)."""
        ready = getattr(self.instance, "local_activities_ready", None)
        return ready() if ready is not None else True

    def heartbeat_at(self) -> float:
        return self.instance.local_activity_heartbeat_at()


class HistoryUnavailable(Exception):
    """The start of a task's history could not be had: fetching it failed, or what came
    back does not lead to the task's own events."""


def whole_history(task: WorkflowTask, fetched: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events 1..first_event_id-1 from `fetched` (the run's history, possibly longer by
    now), then the task's own: the history up to the task's WORKFLOW_TASK_SCHEDULED."""
    keep = task.first_event_id - 1
    head = fetched[:keep]
    if len(head) < keep or [e.get("event_id") for e in head] != list(range(1, keep + 1)):
        raise HistoryUnavailable(f"GET_HISTORY returned {len(fetched)} events, the task needs events "
                                 f"1..{keep} before its own")
    if len(fetched) > keep and task.history and fetched[keep] != task.history[0]:
        raise HistoryUnavailable(f"event {task.first_event_id} of the fetched history is not the task's")
    return head + task.history


class WorkflowTaskHandler:
    def __init__(self, definitions: Mapping[str, Any], identity: str, new_instance: InstanceFactory,
                 cache: StickyCache[Instance], fetch_history: HistoryFetcher | None = None) -> None:
        self.definitions = definitions
        self.identity = identity
        self.new_instance = new_instance
        self.cache = cache
        self.fetch_history = fetch_history
        #: Tasks whose history had to be fetched (no cached instance continued it).
        self.fetches = 0
        #: Set when an ActivityWorker of this process runs the queue's activities eagerly.
        self.eager: EagerActivities | None = None
        #: Set when answers ask for the run's next task back (see `handed_tasks`).
        self.handed: HandedTasks | None = None
        #: Set when local activities are checkpointed: sends a task's markers to the log.
        self.journal: MarkerJournal | None = None

    def answer(self, task: WorkflowTask, wait: bool = True) -> Record | PendingAnswer | None:
        """TASK_COMPLETE or TASK_FAIL for `task` (None: a retried attempt failed again, left
        to time out); never raises for what the code does. With `wait=False`, a task whose
        code waits on local activities is a PendingAnswer to `resume` later."""
        definition = self.definitions.get(task.workflow_type)
        if definition is None:
            self.cache.evict(task.run_id)
            return self._fail(task, UNHANDLED_FAILURE, failure_from_exception(errors.ApplicationError(
                not_registered(task.workflow_type, self.definitions), type="NotFoundError")))
        try:
            instance = self._instance_for(task, definition)
            if hasattr(instance, "offer_updates"):  # test doubles may lack it
                instance.offer_updates(list(task.updates))
                instance.offer_journaled(task.journaled_markers)
                instance.marker_journal = self.journal.for_task(task) if self.journal is not None else None
            outcome = instance.activate() if wait else instance.activate(wait=False)
        except HistoryUnavailable as exc:
            self.cache.evict(task.run_id)
            return self._fail(task, UNHANDLED_FAILURE, failure_from_exception(errors.ApplicationError(
                f"the history of workflow {task.workflow_id} run {task.run_id} before event "
                f"{task.first_event_id} is unavailable: {exc}", type="HistoryUnavailable")))
        except Exception as exc:  # a runtime bug fails this task, never the worker
            log.exception("workflow_activation_crashed", workflow_id=task.workflow_id, run_id=task.run_id)
            self.cache.evict(task.run_id)
            return self._fail(task, UNHANDLED_FAILURE, failure_from_exception(exc))
        return self._settle(task, instance, outcome)

    def resume(self, pending: PendingAnswer) -> Record | PendingAnswer | None:
        """`answer` again for a task that waited on local activities."""
        task = pending.task
        try:
            outcome = pending.instance.activate(wait=False)
        except Exception as exc:  # a runtime bug fails this task, never the worker
            log.exception("workflow_activation_crashed", workflow_id=task.workflow_id, run_id=task.run_id)
            self.cache.evict(task.run_id)
            return self._fail(task, UNHANDLED_FAILURE, failure_from_exception(exc))
        return self._settle(task, pending.instance, outcome)

    def answer_when_local_activities_end(self, waiting: list[PendingAnswer],
                                         send: Callable[[WorkflowTask, Record | None], None]) -> None:
        """Tasks whose code waits on local activities (a batch's): all their activities run
        at once, and each task is `send` its answer as soon as its code is done or must
        heartbeat."""
        while waiting:
            jobs = [job for pending in waiting for job in pending.jobs()]
            timeout = max(min(pending.heartbeat_at() for pending in waiting) - time.monotonic(), 0)
            concurrent.futures.wait(jobs, timeout=timeout, return_when=concurrent.futures.FIRST_COMPLETED)
            still = []
            for pending in waiting:
                if not pending.ready():  # nothing it waits on is done: no need to step its code
                    still.append(pending)
                    continue
                answer = self.resume(pending)
                if isinstance(answer, PendingAnswer):
                    still.append(answer)
                else:
                    send(pending.task, answer)
            waiting = still

    def _settle(self, task: WorkflowTask, instance: Instance, outcome: Any) -> Record | PendingAnswer | None:
        if outcome is None:
            return PendingAnswer(task, instance)
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
        commands, request, asks_next = self._listen(commands)
        flags = {}
        if getattr(outcome, "force_new_task", False):  # a workflow task heartbeat: local activities run on
            flags["force_create_new_workflow_task"] = True
        if asks_next:  # it runs the run's next task from its cache
            flags["return_new_workflow_task"] = True
        extra = {"attributes": orjson.dumps(flags).decode()} if flags else {}
        answer = self._command(task, WorkflowIntent.TASK_COMPLETE, commands=orjson.dumps(commands).decode(), **extra)
        if request is not None:
            answer.request_id, answer.reply_partition = request
        return answer

    def _listen(self, commands: list[dict]) -> tuple[list[dict], tuple[str, int] | None, bool]:
        """The commands (marked for eager execution where a slot is held), where the engine
        answers the TASK_COMPLETE if it needs to (the eager activities it starts here, the
        run's next task handed back), and whether it asks for that task (unless the run
        closes)."""
        reservation = None
        if self.eager is not None:
            commands, reservation = self.eager.reserve(commands)
        asks_next = self.handed is not None and not any(c.get("type") in CLOSE_COMMANDS for c in commands)
        if self.handed is not None and (reservation is not None or asks_next):
            # With eager activities, heard as long as their own listening would be.
            request = self.handed.listen(reservation.on_reply, EAGER_LISTEN_S) if reservation is not None \
                else self.handed.listen()
            if request is not None:
                return commands, request, asks_next
        if reservation is not None:  # not handing back: the activity worker's replies hear it
            return commands, self.eager.listen(reservation), False
        return commands, None, False

    def _instance_for(self, task: WorkflowTask, definition: Any) -> Instance:
        cached = self.cache.take(task, self.identity)
        if cached is not None:
            instance, new_events = cached
            instance.extend(new_events)
            return instance
        history = task.history
        if not task.is_whole:
            if self.fetch_history is None:
                raise HistoryUnavailable("this worker cannot fetch histories")
            self.fetches += 1
            try:
                fetched = self.fetch_history(task)
            except Exception as exc:  # whatever the transport raised: the task cannot run
                raise HistoryUnavailable(f"{type(exc).__name__}: {exc}") from exc
            history = whole_history(task, fetched)
        return self.new_instance(definition, history, task.run_id)

    def _fail(self, task: WorkflowTask, cause: str, failure: dict[str, Any]) -> Record | None:
        log.warning("workflow_task_failing", workflow_id=task.workflow_id, run_id=task.run_id,
                    scheduled_event_id=task.scheduled_event_id, attempt=task.attempt, cause=cause,
                    message=failure.get("message"))
        if task.attempt >= 2:
            # The engine schedules the next attempt as soon as a failure arrives: reporting
            # every one would have worker and engine spin on code that cannot replay (about
            # 60 attempts a second on one run). Unanswered, the attempt times out after the
            # task timeout, longer from attempt 4 (SEMANTICS.md 3.4). Transient attempts
            # leave no history, so the failure it would have carried is lost to nobody.
            return None
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
