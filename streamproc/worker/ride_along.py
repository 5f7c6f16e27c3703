"""The next workflow task rides with an eager activity's completion (the engine's side is
`engine/workflows/ride_along.py`).

When an activity of a run cached here completes, the run's next workflow task would show
the code [ActivityTaskStarted, ActivityTaskCompleted, WorkflowTaskScheduled]. If the run is
idle here (cached, no task of it running or handed back and waiting), the worker runs that
task in its turn (`task_turns`: the completion waits in line behind the tasks of other runs,
unless the turns stop moving for `TURN_PATIENCE_S`; `WAIT_CAP_S` at most, and never up to
the attempt's deadline), on histories it builds itself from
what its cache answered last, and puts the answer in the COMPLETE: one command and one
engine transaction instead of two. Under load the worker is nearly always running some
run's task: a completion that did not wait went alone seven times in ten at 100 runs in
flight, and its next task, handed back, waited in the same line anyway. The engine
takes it only if the run is exactly where the worker assumed (its last completed task is
the cached one, and the next event id is the one the worker counted); else it schedules the
task as without it and hands it back.

What the worker can count: the events its last answer made (WORKFLOW_TASK_STARTED,
_COMPLETED, one event per command), so it rides along only after an answer made of
commands of one event each that it knows (`_COUNTED`). What it cannot know is the task's
time (the engine's clock when it schedules it): an activation that reads it (`workflow.now()`,
`time()`, the loop's time) or calls local activities is not sent (`instance.speculate`; the
instance is dropped, and the task replays from history), and the workflow type is not tried
again by this worker.

The instance leaves the cache while the answer is out: a task or a query of the run meanwhile
replays from the history, which is the engine's truth either way. RODE_ALONG settles it
(`settle`): accepted, the instance goes back to the cache with the task's
WORKFLOW_TASK_SCHEDULED as written; refused (or no verdict, the engine away), it is
dropped, and the task handed back replays from history.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson
import structlog

from streamproc.kafka.replies import Reply
from streamproc.protocol.limits import MAX_PAYLOAD_BYTES
from streamproc.protocol.records import Record, RecordType, ValueType, WorkflowIntent
from streamproc.protocol.workflow_commands import CLOSE_COMMANDS, WorkflowCommandType

if TYPE_CHECKING:
    from streamproc.metrics.worker_metrics import WorkerMetrics
    from streamproc.worker.handed_tasks import HandedTasks
    from streamproc.worker.task_turns import TaskTurns
    from streamproc.worker.workflow_activation import WorkflowTaskHandler

__all__ = ["RideAlong", "SKIP_REASONS", "is_verdict"]

log = structlog.get_logger("streamproc.worker")

#: The commands whose event the worker writes itself as the engine does (one event each).
_COUNTED = frozenset({WorkflowCommandType.SCHEDULE_ACTIVITY_TASK, WorkflowCommandType.START_TIMER})
#: How long a completion waits for the workflow worker's turn while no turn changes hands
#: (the thread that has it is held up: local activities, a history fetch); then it goes
#: without an answer. A turn taken by the tasks in line ahead is waited out: the answer
#: saves the engine a transaction and the worker a task, which would wait in the same line.
TURN_PATIENCE_S = 0.1
#: The longest a completion waits in line in all, however the line moves (with 100 runs in
#: flight it could be ~10 s): an activity done waits so long for no one, counted overdue.
WAIT_CAP_S = 1.0
#: How long before its attempt's deadline a completion stops waiting: an answer the engine
#: gets after the attempt timed out is refused, and the activity retried.
DEADLINE_MARGIN_S = 0.5
#: How long an answer out waits for its verdict before its instance is forgotten.
VERDICT_S = 120.0
#: The most an answer and the activity's result may weigh together in the COMPLETE: a payload's
#: limit, so the command stays well under the engine's and the broker's (a result the code
#: passes on is in both, JSON-escaped again in the answer). Heavier, the completion goes alone.
ANSWER_BUDGET_BYTES = MAX_PAYLOAD_BYTES


def is_verdict(record: Record) -> bool:
    return record.value_type == ValueType.WORKFLOW and record.intent == WorkflowIntent.RODE_ALONG \
        and record.record_type is RecordType.EVENT


#: Why a completion went without an answer (`RideAlong.skipped`, the stats' `ride_along_skipped`,
#: Prometheus' `streamproc_workflow_task_ride_along_skipped_total`).
SKIP_REASONS = {
    "not_cached": "the run is not in the sticky cache (never was, evicted, or a task of it runs now)",
    "no_turn": f"the thread that runs workflow tasks was held up longer than {TURN_PATIENCE_S} s, or the "
               f"turn did not come within {WAIT_CAP_S} s or {DEADLINE_MARGIN_S} s before the attempt's deadline",
    "type_not_tried": "the workflow type's code read the task's time or called a local activity before",
    "answer_out": "an answer of the run waits for its verdict",
    "task_held": "a task of the run was handed back and waits to run",
    "result_too_large": "the activity's result leaves no room for an answer",
    "cache_moved": "the run's cached task is not the one the completion asked after",
    "commands_not_counted": "the cached task's commands are not all of one event the worker writes",
    "code_read_time": "the activation read the task's time or called a local activity",
    "answer_too_large": "the answer and the result weigh more than the budget",
    "crashed": "a runtime bug",
    "stopping": "the worker stops: no answer runs ahead, nor asks for eager work, for a worker leaving",
}


class _TooLarge(Exception):
    """The answer would make the COMPLETE too large to send (`ANSWER_BUDGET_BYTES`)."""


class RideAlong:
    """Answers a run's next task with its activity's completion, for one workflow worker."""

    def __init__(self, handler: WorkflowTaskHandler, handed: HandedTasks, turns: TaskTurns,
                 stats: Any = None, metrics: WorkerMetrics | None = None, task_queue: str = "") -> None:
        self.handler = handler
        #: Prometheus (None: off): a task run ahead counts as a workflow task's execution, and
        #: each verdict is counted; it has no schedule-to-start (answered where it was scheduled).
        self.metrics = metrics
        self.task_queue = task_queue
        #: The workflow worker's stats (`rode_along`, `ride_along_refused`), kept up to date.
        self.stats = stats
        self.handed = handed
        self.turns = turns
        #: run id -> (the instance that answered, its task's Scheduled as guessed, closes, since)
        self._out: dict[str, tuple[Any, dict[str, Any], bool, float]] = {}
        #: Guards `_out`: answers go out on the activity threads, verdicts come on the listener's.
        self._lock = threading.Lock()
        #: Workflow types whose code read the task's time or called a local activity in a
        #: task run ahead: not tried again (each try that cannot answer costs a replay).
        self._not_tried: set[str] = set()
        #: Answers sent, accepted, refused.
        self.sent = self.accepted = self.refused = 0
        #: Completions that went without an answer, by reason (`SKIP_REASONS`).
        self.skipped: collections.Counter[str] = collections.Counter()

    def skip(self, reason: str) -> None:
        """Count a completion that goes without an answer, and why (`SKIP_REASONS`)."""
        with self._lock:  # completions end on many activity threads at once
            self.skipped[reason] += 1
            if self.stats is not None:  # a new dict: a thread copying the stats never sees it change
                self.stats.ride_along_skipped = dict(self.skipped)
        if self.metrics is not None:
            self.metrics.workflow_task_ride_along_skip(self.task_queue, reason)

    def ask(self, value: dict[str, Any], task: dict[str, Any], result: str,
            handed_slot: Callable[[], bool] | None = None,
            deadline: float | None = None) -> Callable[[Reply], bool] | None:
        """For the COMPLETE `value` of the activity `task` with `result`: when the run is
        idle here and its next task can be answered now, put the answer in `value` (with
        the ask for the next task) and return what hears the replies; None otherwise.
        `handed_slot` gives the activity's slot to the answer's first eager activity
        (`EagerActivities.reserve`): with every slot busy, as at as many runs in flight as
        slots, the next step would otherwise go through the task queue. `deadline`: when
        the engine gives the activity's attempt up (monotonic; None: never): the wait in
        line ends `DEADLINE_MARGIN_S` before it, and `WAIT_CAP_S` from now at the latest."""
        run_id = task.get("run_id") or ""
        if not run_id:
            return None
        if task.get("workflow_type") in self._not_tried:
            return self.skip("type_not_tried")
        until = time.monotonic() + WAIT_CAP_S
        if deadline is not None:
            until = min(until, deadline - DEADLINE_MARGIN_S)
        if not self.turns.wait_turn(TURN_PATIENCE_S, until):
            return self.skip("no_turn")
        try:
            if self.handed.stopped:  # (seen in the turn: the slots are given back in one, `WorkflowWorker`)
                return self.skip("stopping")  # a reservation now would never be given back
            cached_at = self.handed.cached_at(run_id)
            if cached_at:  # a task of the run (a signal's) may have moved the cache while this waited
                value["return_workflow_task_after"] = cached_at
            return self._answer(value, task, run_id, result, handed_slot)
        except Exception:  # a runtime bug: the completion goes without the answer
            log.exception("workflow_task_ride_along_crashed", run_id=run_id)
            self.skip("crashed")
            value.pop("workflow_task_answer", None)  # no verdict would reach a listener
            self.handler.cache.evict(run_id)
            return None
        finally:
            self.turns.leave()

    def _answer(self, value: dict[str, Any], task: dict[str, Any], run_id: str, result: str,
                handed_slot: Callable[[], bool] | None) -> Callable[[Reply], bool] | None:
        with self._lock:  # a verdict lost (the engine away) holds its run's ride-along only this long
            self._forget_overdue()
        cache = self.handler.cache
        found = cache.entry(run_id)
        if found is None:
            return self.skip("not_cached")
        if run_id in self._out:
            return self.skip("answer_out")
        if self.handed.holds_task_for(run_id):
            return self.skip("task_held")
        instance, answered = found
        if len(result or "") >= ANSWER_BUDGET_BYTES:  # no answer would fit beside it
            return self.skip("result_too_large")
        if value.get("return_workflow_task_after") != answered.get("event_id"):
            return self.skip("cache_moved")
        last = getattr(instance, "last_commands", None)
        if last is None or any(c.get("type") not in _COUNTED for c in last) \
                or answered.get("event_type") != "WORKFLOW_TASK_SCHEDULED":
            return self.skip("commands_not_counted")
        events, next_event_id = self._next_task_events(answered, last, task, result)
        cache.evict(run_id)  # out of the cache until the engine says (a task meanwhile replays)
        began = time.monotonic()
        outcome = instance.speculate(events)
        if self.metrics is not None:
            self.metrics.workflow_task_executed(self.task_queue, time.monotonic() - began)
        if outcome is None:
            if getattr(instance, "speculation_refused", None):  # likely again at its next step
                self._not_tried.add(task.get("workflow_type"))
            return self.skip("code_read_time")
        commands, reservation = outcome.commands, None
        if self.handler.eager is not None:
            commands, reservation = self.handler.eager.reserve(commands, handed_slot)
        try:
            closes = any(c.get("type") in CLOSE_COMMANDS for c in commands)
            flags = {} if closes else {"return_new_workflow_task": True}
            answer = orjson.dumps({"next_event_id": next_event_id, "commands": commands,
                                   "identity": self.handler.identity, "attributes": flags}).decode()
            if len(answer) + len(result or "") > ANSWER_BUDGET_BYTES:
                log.info("workflow_task_ride_along_too_large", run_id=run_id, answer_bytes=len(answer))
                raise _TooLarge  # the instance ran ahead: dropped, the task replays
            with self._lock:  # `settle` pops from it on the replies listener's thread
                self._out[run_id] = (instance, events[-1], closes, time.monotonic())
        except BaseException as exc:
            if reservation is not None:
                reservation.release()  # no answer goes: its eager activities never come
            if isinstance(exc, _TooLarge):
                return self.skip("answer_too_large")
            raise
        self.sent += 1
        if self.stats is not None:
            self.stats.ride_along_sent += 1

        def on_reply(reply: Reply) -> bool:
            """The COMPLETE's replies: RODE_ALONG first, then, accepted, what a TASK_COMPLETE
            gets (eager activity tasks, then the handed-back task or TASK_PROCESSED)."""
            record = reply.record
            if is_verdict(record):
                accepted = self.settle(record)
                if not accepted and reservation is not None:
                    reservation.release()
                # Without eager activities nothing else is for this answer (a task handed back
                # after it is heard by the worker's prefix, `handed_tasks`).
                return not accepted or reservation is None
            if reservation is not None and record.value_type == ValueType.ACTIVITY_TASK:
                return reservation.on_reply(reply)  # an eager activity: run it; TASK_PROCESSED ends them
            if reservation is not None:
                reservation.release()  # a handed task, TASK_PROCESSED or a refusal: nothing more comes
            if record.record_type is RecordType.COMMAND_REJECTION:
                with self._lock:
                    self._out.pop(run_id, None)
                return False  # the activity attempt logs it
            if record.value_type == ValueType.WORKFLOW and record.intent == WorkflowIntent.WORKFLOW_TASK:
                self.handed.put(record)
            return True
        # Last: an answer in the COMPLETE is one whose replies `on_reply` hears.
        value["workflow_task_answer"] = answer
        return on_reply

    def _next_task_events(self, answered: dict[str, Any], last: list[dict[str, Any]], task: dict[str, Any],
                          result: str) -> tuple[list[dict[str, Any]], int]:
        """The events from the cached task's WORKFLOW_TASK_STARTED to the next task's
        WORKFLOW_TASK_SCHEDULED, as the engine writes them if nothing else comes between."""
        scheduled_id, identity, now_ms = answered["event_id"], self.handler.identity, time.time_ns() // 1_000_000
        activity_id = task.get("scheduled_event_id")

        def event(event_id: int, event_type: str, attributes: dict[str, Any]) -> dict[str, Any]:
            return {"event_id": event_id, "event_type": event_type, "event_time_ms": now_ms, "attributes": attributes}

        events = [event(scheduled_id + 1, "WORKFLOW_TASK_STARTED", {"scheduled_event_id": scheduled_id,
                                                                    "identity": identity}),
                  event(scheduled_id + 2, "WORKFLOW_TASK_COMPLETED", {
                      "scheduled_event_id": scheduled_id, "started_event_id": scheduled_id + 1, "identity": identity})]
        for command in last:
            kind = WorkflowCommandType(command["type"])
            attributes = {k: v for k, v in command.items() if k != "type"}
            attributes.update({attribute: command.get(field) for field, attribute in kind.spec.identity})
            attributes["workflow_task_completed_event_id"] = scheduled_id + 2
            events.append(event(scheduled_id + len(events) + 1, kind.spec.event.name, attributes))
        next_event_id = scheduled_id + len(events) + 1
        started_by = task.get("identity") or identity
        events += [event(next_event_id, "ACTIVITY_TASK_STARTED", {
                       "scheduled_event_id": activity_id, "identity": started_by, "attempt": task.get("attempt", 1),
                       "last_failure": None}),
                   event(next_event_id + 1, "ACTIVITY_TASK_COMPLETED", {
                       "scheduled_event_id": activity_id, "started_event_id": next_event_id, "result": result,
                       "identity": started_by}),
                   event(next_event_id + 2, "WORKFLOW_TASK_SCHEDULED", {**answered.get("attributes", {}), "attempt": 1})]
        return events, next_event_id

    def settle(self, record: Record) -> bool:
        """RODE_ALONG for a run's answer (on the replies listener's thread, before the eager
        activities that follow it run): accepted, the instance goes back to the cache, its
        guessed WORKFLOW_TASK_SCHEDULED replaced by the engine's. Whatever the cache holds is
        checked against the history of the run's next task (`sticky_cache`), so an instance
        put back while another thread answers a task of the run costs a replay at worst.
        Returns whether the answer was accepted."""
        run_id = record.value.get("run_id") or ""
        with self._lock:
            out = self._out.pop(run_id, None)
        verdict = orjson.loads(record.value.get("attributes") or "{}")
        if self.metrics is not None:
            self.metrics.workflow_task_rode_along(self.task_queue, bool(verdict.get("accepted")))
        if not verdict.get("accepted"):
            self.refused += 1
            if self.stats is not None:
                self.stats.ride_along_refused += 1
            log.info("workflow_task_ride_along_refused", run_id=run_id, reason=verdict.get("reason"))
            return False
        self.accepted += 1
        if self.stats is not None:
            self.stats.rode_along += 1
        (written,) = orjson.loads(record.value.get("history") or "[{}]")
        if out is None:
            return True
        instance, guessed, closes, _ = out
        if not closes and written.get("event_id") == guessed["event_id"]:
            guessed.clear()
            guessed.update(written)  # the instance's history holds this very dict
            self.handler.cache.restore(run_id, instance, guessed)
        return True

    def _forget_overdue(self) -> None:
        """Answers whose verdict never came (the engine away): their instances are dropped
        (under `_lock`)."""
        limit = time.monotonic() - VERDICT_S
        for run_id in [r for r, out in self._out.items() if out[3] < limit]:
            del self._out[run_id]
