"""Writing a run's history: appending events, buffering them while a workflow task is out,
scheduling and publishing workflow tasks, closing the run (docs/workflow-protocol.md).

Every appended event is stored in the run's history and written to the events topic
(intent = the event type name). Events that arrive while a workflow task is out are
buffered in the run and appended when the task ends, followed by a new task, so a
worker never misses an event it was not shown.

A retried task attempt (2 or more) is *transient* (SEMANTICS.md 3.4): its
WORKFLOW_TASK_SCHEDULED is shown to the worker but written only if the attempt
completes, so a run whose tasks keep failing does not grow its history.

A task carries the run's history from the previous completed task's
WORKFLOW_TASK_SCHEDULED on (`first_event_id`): the worker that completed that task
usually gets this one too (same workflow id, same task partition) and has the rest
cached. The first task of a run and the one after a failed or timed-out task carry the
whole history. Shipping it all every time would cost O(n^2) for a run of n tasks.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import orjson
import structlog

from streamproc.engine.processing import ProcessingContext
from streamproc.engine.workflows.journaled_markers import MAX_ATTEMPT_CARRIED_TO, carried, forget as forget_journaled
from streamproc.engine.workflows.relatives import on_run_closed
from streamproc.engine.workflows.result_waiters import answer_waiters
from streamproc.engine.workflows.update_answers import abort_updates
from streamproc.protocol.records import ValueType, WorkflowIntent
from streamproc.semantics.workflow_events import EventType
from streamproc.semantics.workflow_history_limits import LimitAction, check_history_limits
from streamproc.semantics.workflow_ids import HISTORY_SERVICE_IDENTITY, WorkflowExecutionStatus
from streamproc.semantics.workflow_timeouts import PLAIN_TIMEOUT_ATTEMPTS, workflow_task_timeout_for_attempt
from streamproc.state.workflow_run import WorkflowRun
from streamproc.state.workflow_run_parts import PendingEvent, WorkflowTaskOut

log = structlog.get_logger("streamproc.engine")

WF = ValueType.WORKFLOW
E = EventType

#: Deadline kinds of a run (one armed deadline each); the names are the checker's intents.
TASK_TIME_OUT = WorkflowIntent.TASK_TIME_OUT.value
RUN_TIME_OUT = WorkflowIntent.RUN_TIME_OUT.value
EXECUTION_TIME_OUT = WorkflowIntent.EXECUTION_TIME_OUT.value
BACKOFF_START = WorkflowIntent.BACKOFF_START.value

#: Enum members looked up once (a member's lookup on its class is a Python call per use).
_TERMINATED = E.WORKFLOW_EXECUTION_TERMINATED
_SCHEDULED, _STARTED = E.WORKFLOW_TASK_SCHEDULED, E.WORKFLOW_TASK_STARTED
_WORKFLOW_TASK = WorkflowIntent.WORKFLOW_TASK

#: WORKFLOW_TASK_FAILED's cause when the run closes under a task that is out.
FORCE_CLOSE_COMMAND = "FORCE_CLOSE_COMMAND"

class HistoryLimitExceeded(Exception):
    """A command would grow a run's history past its limit (SEMANTICS.md 6.3): its writes
    are discarded, the run is terminated (`terminate_at_history_limit`) and the command
    is rejected with the same reason."""

    def __init__(self, run_key: int, reason: str) -> None:
        super().__init__(reason)
        self.run_key = run_key
        self.reason = reason


class RunWriter:
    """One command's writes to one run: its history appended (and buffered while a task is
    out), its workflow tasks scheduled and ended, its close. A processor makes one for the
    run it loaded and calls its methods; the run itself is the typed `WorkflowRun`."""

    __slots__ = ("ctx", "key", "run")

    def __init__(self, ctx: ProcessingContext, key: int, run: WorkflowRun) -> None:
        self.ctx = ctx
        self.key = key
        self.run = run

    # the history ---------------------------------------------------------------------------
    def append(self, event_type: EventType, attributes: dict[str, Any], event_time_ms: int | None = None) -> int:
        """Append one event to the history and the events topic; returns its event id.
        `event_time_ms` defaults to now (a transient task's Scheduled keeps the time its
        worker was shown). Raises HistoryLimitExceeded when the history of a running
        workflow grows too large."""
        ctx, run = self.ctx, self.run
        event_id = run.next_event_id
        time_ms = ctx.now_ms if event_time_ms is None else event_time_ms
        name = event_type.name
        # The attributes encoded once, for the stored event and the events topic's record.
        attributes_json = orjson.dumps(attributes)
        run.take_event_id(ctx.history.append_encoded(self.key, event_id, name, time_ms, attributes_json))
        limits = ctx.limits.history
        if run.is_open and event_type is not _TERMINATED and (
                run.history_size_bytes > limits.size_warn_bytes or run.history_size_bytes > limits.size_error_bytes
                or event_id > limits.count_warn or event_id > limits.count_error):
            self._check_limits(event_id)  # below all four, neither warned nor terminated: nothing to ask
        ctx.out.event(WF, name, self.key, {
            "workflow_id": run.workflow_id, "run_id": run.run_id, "workflow_type": run.workflow_type,
            "task_queue": run.task_queue, "event_id": event_id, "event_time_ms": time_ms,
            "attributes": attributes_json.decode()}, reply=False)
        return event_id

    def append_all(self, events: list[PendingEvent]) -> None:
        run = self.run
        previous = 0
        for event in events:
            attributes = event.attributes
            if event.links_started:
                attributes = {**attributes, "started_event_id": previous}
            child = run.children.get(attributes.get("initiated_event_id", 0)) if event.type_name in _CHILD_EVENTS \
                else None
            if child is not None and event.type_name in _CHILD_CLOSES:
                # A child's close names its started event, whose id was known only once appended.
                attributes = {**attributes, "started_event_id": child.started_event_id}
            previous = self.append(E[event.type_name], attributes, event.event_time_ms)
            if child is not None:
                if event.type_name == E.CHILD_WORKFLOW_EXECUTION_STARTED.name:
                    child.started_event_id = previous
                else:
                    del run.children[attributes["initiated_event_id"]]

    def deliver(self, events: list[PendingEvent], hand_back_after: int = 0) -> None:
        """Events from outside a workflow task (an activity closed, a timer fired, a cancel
        request): appended with a new workflow task, or buffered while one is out.
        `hand_back_after`: the command's caller (the worker that ran an eager activity)
        has the run cached as of the task scheduled at that event id and asks for the next
        task as a reply; it gets it when that is the run's last completed task."""
        run = self.run
        if run.task is not None:
            run.buffered.extend(events)
            return
        self.append_all(events)
        if BACKOFF_START not in run.deadlines:  # a run in its first-task backoff waits
            self.schedule_task(hand_back=hand_back_after > 0 and hand_back_after == run.task_history_from)

    def end_backoff_now(self) -> None:
        """A run waiting out its first-task backoff (a start delay, a cron time, a retry
        backoff) gets its first workflow task now, as a Temporal server (1.32, observed) does
        for a cancel request, a signal-with-start that finds the run, and an update.
        The backoff's due date is disarmed: when it comes, it is stale."""
        run = self.run
        if BACKOFF_START in run.deadlines:
            self.ctx.workflow_timers.disarm(self.key, run, BACKOFF_START)
            if run.task is None:
                self.schedule_task()

    def flush_buffer(self) -> bool:
        """Append what arrived while the task was out; True if there was anything."""
        buffered = self.run.take_buffered()
        self.append_all(buffered)
        return bool(buffered)

    def _check_limits(self, event_count: int) -> None:
        run, limits = self.run, self.ctx.limits.history
        verdict = check_history_limits(event_count, run.history_size_bytes, limits)
        if verdict.action is LimitAction.TERMINATE:
            raise HistoryLimitExceeded(self.key, verdict.termination_reason)
        if verdict.warn and not run.limit_warned:
            run.limit_warned = True
            log.warning("workflow_history_large", workflow_id=run.workflow_id, run_id=run.run_id,
                        events=event_count, history_size_bytes=run.history_size_bytes)

    # workflow tasks ------------------------------------------------------------------------
    def schedule_task(self, *, speculative: bool = False, hand_back: bool = False) -> None:
        """WORKFLOW_TASK_SCHEDULED (or, for a retried attempt, its transient copy shown only to
        the worker), its timeout armed, and the task published with the history and the
        updates waiting for the code. A `speculative` task only carries updates: its
        Scheduled is written (like a transient one's) only if it completes with more than
        rejections, so a rejected update leaves no history, as in Temporal.
        `hand_back`: the command's caller asked for the task (Temporal's
        return_new_workflow_task): it goes to the caller's replies partition instead of the
        task queue when it fits one record (the caller has the run cached: no hop through
        the queue). Its timeout runs as for any task: a worker that dies with it lets it
        time out and the next attempt goes through the queue."""
        ctx, run_key, run = self.ctx, self.key, self.run
        attempt = run.task_attempt
        attributes = scheduled_attributes(run, attempt)
        transient = attempt >= 2 or speculative
        updates = run.admitted_updates()
        if transient:
            # Its id is the next one: nothing is appended while a task is out (events are
            # buffered), so the id is still free when the attempt completes.
            event_id = run.next_event_id
            shown = [orjson.dumps({"event_id": event_id, "event_type": _SCHEDULED.name,
                                   "event_time_ms": ctx.now_ms, "attributes": attributes})]
        else:
            event_id = self.append(_SCHEDULED, attributes)
            shown = []
        run.task = WorkflowTaskOut(event_id, attempt, ctx.now_ms, transient, updates, speculative)
        ctx.workflow_timers.arm(run_key, run, TASK_TIME_OUT, ctx.now_ms + attributes["start_to_close_timeout_ms"])
        first_event_id = run.task_history_from or 1
        pages = history_pages(ctx, run_key, first_event_id, run.next_event_id - 1, shown)
        handed_back = hand_back and len(pages) == 1 and not speculative and ctx.out.caller_listens
        for page, history in enumerate(pages):
            value = {"workflow_id": run.workflow_id, "run_id": run.run_id,
                     "workflow_type": run.workflow_type, "task_queue": run.task_queue,
                     "attempt": attempt, "scheduled_event_id": event_id, "event_time_ms": ctx.now_ms,
                     "first_event_id": first_event_id, "history": history, "page": page, "pages": len(pages),
                     "attributes": _task_attributes(run, updates, first_page=page == 0)}
            if handed_back:
                ctx.out.reply(WF, _WORKFLOW_TASK, run_key, value)
            else:
                ctx.out.task(run.task_queue, run_key, value, WF, _WORKFLOW_TASK)
        run.task.handed_back = handed_back
        if not handed_back:  # a handed-back task's worker answers the queries after it (`queries.py`)
            self.send_waiting_queries()

    def send_waiting_queries(self) -> None:
        """The queries that waited for this task (or the close): after it, on the same partition."""
        if self.run.waiting_queries:
            send_query_tasks(self.ctx, self.key, self.run, self.run.waiting_queries)
            self.run.waiting_queries = []

    def end_task(self, identity: str) -> tuple[int, int]:
        """The answer to the task arrived (or its timeout): WORKFLOW_TASK_STARTED, which we write
        only now, after a transient attempt's Scheduled. Returns (scheduled, started) event ids."""
        run = self.run
        task = run.task
        scheduled_id = task.scheduled_event_id
        if task.transient:
            written = self.append(_SCHEDULED, scheduled_attributes(run, task.attempt),
                                  event_time_ms=task.scheduled_time_ms)
            assert written == scheduled_id, f"transient task {scheduled_id} was written as event {written}"
        limits = self.ctx.limits.history
        if (run.history_size_bytes < limits.size_suggest_continue_as_new_bytes
                and run.next_event_id < limits.count_suggest_continue_as_new):
            suggest, reasons = False, []  # below both thresholds: the verdict would suggest nothing
        else:
            verdict = check_history_limits(run.next_event_id, run.history_size_bytes, limits)
            suggest = verdict.suggest_continue_as_new
            reasons = [r.name for r in verdict.suggest_continue_as_new_reasons]
        started_id = self.append(_STARTED, {
            "scheduled_event_id": scheduled_id, "identity": identity,
            "history_size_bytes": run.history_size_bytes,
            "suggest_continue_as_new": suggest, "suggest_continue_as_new_reasons": reasons})
        self.ctx.workflow_timers.disarm(self.key, run, TASK_TIME_OUT)
        run.task = None
        return scheduled_id, started_id

    def end_failed_task(self, identity: str, end_type: EventType, attributes: dict[str, Any]) -> None:
        """A task failed or timed out: WORKFLOW_TASK_STARTED and `end_type` (scheduled and
        started ids added to `attributes`); a transient attempt leaves no event at all."""
        run = self.run
        run.task_history_from = 1  # the next worker may have run ahead of history: show it all
        if run.task.transient:
            self.ctx.workflow_timers.disarm(self.key, run, TASK_TIME_OUT)
            run.task = None
            return
        scheduled_id, started_id = self.end_task(identity)
        self.append(end_type, {"scheduled_event_id": scheduled_id, "started_event_id": started_id, **attributes})

    def retry_task(self, next_attempt: int) -> None:
        """After a failed or timed-out task: buffered events, then the next attempt. New events
        make it a normal task again (attempt 1), as in Temporal: the workflow has something
        new to see, and the events it is shown must be in history."""
        run = self.run
        shown_new = self.flush_buffer()
        run.task_attempt = 1 if shown_new else next_attempt
        if shown_new or run.admitted_updates() or run.task_attempt > MAX_ATTEMPT_CARRIED_TO:
            # Its code sees what the journaled attempt did not (their calls may differ), or
            # the attempts the journal was carried to timed out too.
            forget_journaled(run)
        self.schedule_task()

    # the close -----------------------------------------------------------------------------
    def close(self, status: WorkflowExecutionStatus, event_type: EventType, attributes: dict[str, Any]) -> int:
        """Write the close event, send it to the clients waiting for it, and forget everything
        that could still fire for the run: its deadlines, timers and open activities (closed
        silently, as Temporal does)."""
        ctx, run_key, run = self.ctx, self.key, self.run
        event_id = self.append(event_type, attributes)
        answer_waiters(ctx, run_key, run, {"event_id": event_id, "event_type": event_type.name,
                                           "event_time_ms": ctx.now_ms, "attributes": attributes})
        abort_updates(ctx, run_key, run)
        on_run_closed(ctx, run, event_type, attributes)
        self.send_waiting_queries()
        ctx.workflow_timers.disarm_all(run_key, run)
        for entry in run.activities.values():
            found = ctx.activities.get(entry.key)
            if found is not None:
                ctx.activities.remove(entry.key, found[0])
        run.closed(status, ctx.now_ms)
        return event_id

    def force_close(self, status: WorkflowExecutionStatus, event_type: EventType, attributes: dict[str, Any], *,
                    fail_started_task: bool) -> int:
        """Close the run from outside its workflow task (terminate, a workflow timeout, the history
        limit), as Temporal does (SEMANTICS.md 3.3, 6.2): with `fail_started_task`, the task that
        is out is failed first, WORKFLOW_TASK_STARTED + WORKFLOW_TASK_FAILED(FORCE_CLOSE_COMMAND)
        (a transient attempt leaves nothing, as always); then what was buffered; then the close
        event. A task counts as started once dispatched: we write its Started only when an
        answer arrives, and a worker may be running it now. Its late answer finds the run closed
        and is rejected."""
        # The closing batch is not held to the history limits: Temporal checks them only while
        # a run goes on, and terminating at the limit must be able to write its events.
        self.run.status = status
        if fail_started_task and self.run.task is not None:
            self.end_failed_task("", E.WORKFLOW_TASK_FAILED, {
                "cause": FORCE_CLOSE_COMMAND, "failure": None, "identity": HISTORY_SERVICE_IDENTITY})
        self.flush_buffer()
        return self.close(status, event_type, attributes)

    def terminate(self, reason: str, identity: str, details: str | None = None) -> int:
        """WORKFLOW_EXECUTION_TERMINATED, the task that was out failed first (`force_close`)."""
        return self.force_close(WorkflowExecutionStatus.TERMINATED, E.WORKFLOW_EXECUTION_TERMINATED,
                                {"reason": reason, "details": details, "identity": identity},
                                fail_started_task=self.run.task is not None)


#: Events about a child workflow that the run's `children` entry follows.
_CHILD_EVENTS = frozenset(e.name for e in (
    E.CHILD_WORKFLOW_EXECUTION_STARTED, E.START_CHILD_WORKFLOW_EXECUTION_FAILED, E.CHILD_WORKFLOW_EXECUTION_COMPLETED,
    E.CHILD_WORKFLOW_EXECUTION_FAILED, E.CHILD_WORKFLOW_EXECUTION_CANCELED, E.CHILD_WORKFLOW_EXECUTION_TIMED_OUT,
    E.CHILD_WORKFLOW_EXECUTION_TERMINATED))
_CHILD_CLOSES = _CHILD_EVENTS - {E.CHILD_WORKFLOW_EXECUTION_STARTED.name, E.START_CHILD_WORKFLOW_EXECUTION_FAILED.name}


def task_timeout_ms(run: WorkflowRun, attempt: int) -> int:
    """Start-to-close timeout of a task attempt: lengthened from attempt 4 (SEMANTICS 3.4),
    with a jitter drawn from the run id so that processing it again gives the same.
    The first attempts' timeout is the run's own: no jitter drawn (seeding a generator
    from a string costs more than the rest of scheduling the task)."""
    if attempt <= PLAIN_TIMEOUT_ATTEMPTS:
        return run.timeouts.task_ms
    jitter = random.Random(f"{run.run_id}/{attempt}").random()
    timeout = workflow_task_timeout_for_attempt(timedelta(milliseconds=run.timeouts.task_ms),
                                                attempt, jitter=jitter)
    return timeout // timedelta(milliseconds=1)


def scheduled_attributes(run: WorkflowRun, attempt: int) -> dict[str, Any]:
    return {"task_queue": run.task_queue, "start_to_close_timeout_ms": task_timeout_ms(run, attempt),
            "attempt": attempt}


def send_query_tasks(ctx: ProcessingContext, run_key: int, run: WorkflowRun, queries: list[dict]) -> None:
    """QUERY_TASKs for the run's task queue, each answered by a worker to its caller."""
    for query in queries:
        ctx.out.task(run.task_queue, run_key, {
            "workflow_id": run.workflow_id, "run_id": run.run_id, "workflow_type": run.workflow_type,
            "task_queue": run.task_queue, "query_type": query["query_type"], "input": query["input"]},
            WF, WorkflowIntent.QUERY_TASK, reply_partition=query["reply_partition"],
            request_id=query["request_id"])


def _task_attributes(run: WorkflowRun, update_ids: list[str], first_page: bool = True) -> str | None:
    """The updates a task carries to the code and the local activity markers journaled for
    the run (`journaled_markers`, on its first page only: the worker reads that page's), as
    the worker reads them (None: neither)."""
    attributes: dict = {}
    if update_ids:
        attributes["updates"] = [
            {"update_id": u, "name": run.updates[u].name, "input": run.updates[u].input,
             "identity": run.updates[u].identity} for u in update_ids]
    if run.journaled_markers and first_page:
        attributes["journaled_markers"] = carried(run)
    return orjson.dumps(attributes).decode() if attributes else None


def history_pages(ctx: ProcessingContext, run_key: int, first_event_id: int, last_event_id: int,
                  unwritten: Sequence[bytes] = ()) -> list[str]:
    """Events first_event_id..last_event_id, then the `unwritten` ones (a transient task's
    Scheduled), as JSON lists of at most the page byte limit each (an event larger than
    the limit gets a page of its own)."""
    limit = ctx.limits.max_history_page_bytes
    pages: list[list[bytes]] = [[]]
    size = 0
    for data in [*ctx.history.encoded_events(run_key, first_event_id, last_event_id), *unwritten]:
        if pages[-1] and size + len(data) + 1 > limit:
            pages.append([])
            size = 0
        pages[-1].append(data)
        size += len(data) + 1
    return [(b"[" + b",".join(page) + b"]").decode() for page in pages]


def terminate_at_history_limit(ctx: ProcessingContext, exceeded: HistoryLimitExceeded) -> None:
    """After the command's writes were discarded: terminate the run as it was before it."""
    run = ctx.workflows.get(exceeded.run_key)
    RunWriter(ctx, exceeded.run_key, run).terminate(exceeded.reason, HISTORY_SERVICE_IDENTITY)
    ctx.workflows.put(exceeded.run_key, run)
