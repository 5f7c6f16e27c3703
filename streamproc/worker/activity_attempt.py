"""One attempt of one activity on an ActivityWorker: START, run the function, answer.

The worker hands each ACTIVITY_TASK it receives to an attempt on its thread pool. Only a
START the engine accepted (or an eager start: the engine started the attempt for this
worker when it scheduled it) runs the function (the engine refuses a start for an attempt
that is over or an activity cancelled before it started); heartbeats learn of
cancellation; the answer (COMPLETE, FAIL or REPORT_CANCELED) is dropped when the attempt
is already over for the engine.
"""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import structlog

from streamproc.activity import errors
from streamproc.activity.context import (
    ActivityContext,
    CancelReason,
    _CompleteAsyncError,
    info_from_task,
    run_in_context,
    set_current,
)
from streamproc.activity.definition import ActivityDefinition
from streamproc.activity.failures import attempt_failure, failure_from_exception
from streamproc.activity.heartbeats import NOTHING, HeartbeatSender, throttle_interval
from streamproc.type_hints import call_types
from streamproc.protocol.records import (
    ActivityIntent,
    Record,
    RecordType,
    RejectionType,
)
from streamproc.kafka.replies import Reply
from streamproc.worker.task_leases import confirm_start

if TYPE_CHECKING:
    from streamproc.worker.activity_worker import ActivityWorker

log = structlog.get_logger("streamproc.worker")

A = ActivityIntent
#: Rejections that mean "this attempt is over": it timed out, or the activity closed.
_ATTEMPT_OVER = (RejectionType.NOT_FOUND, RejectionType.INVALID_STATE)
_SENT = {A.COMPLETE: "completed", A.FAIL: "failed", A.REPORT_CANCELED: "canceled"}


class ActivityAttempt:
    """One attempt of one activity on this worker, from START to its answer."""

    def __init__(self, worker: ActivityWorker, task: Record, settle: Callable[[], None] = lambda: None,
                 eager: bool = False) -> None:
        self.worker = worker
        #: Started by the engine already (eager execution): no START to send.
        self.eager = eager
        #: Marks the task's START answered: its offset may be committed.
        self.settle = settle
        self.key = task.key
        self.task = task.value
        self.number: int = task.value["attempt"]
        self.activity_id: str = task.value["activity_id"]
        self.log = log.bind(activity_id=self.activity_id, activity_key=self.key, attempt=self.number,
                            activity_type=task.value["activity_type"])
        self.ctx: ActivityContext | None = None
        #: Hears the run's next workflow task among the answer's replies, when it asked for it.
        self._takes_task = None
        #: The attempt's slot went on to the run's next activity (`ActivityWorker.hand_slot_on`): not freed at its end.
        self.slot_handed = False
        #: When START was sent (monotonic): the engine's deadlines are never earlier than ours.
        self.sent_at = time.monotonic()
        #: When the code last heartbeated (monotonic; None: not yet): the heartbeat timeout runs from it.
        self._beat_at: float | None = None
        self._heartbeats = HeartbeatSender(throttle_interval(
            timedelta(milliseconds=task.value["heartbeat_timeout_ms"]) or None), self._send_heartbeat)

    def run(self) -> None:
        started_ms = self.task["started_time_ms"] if self.eager else self._start()
        if started_ms is None:
            return
        w = self.worker
        if w.metrics is not None:  # both times the engine's: Temporal's schedule-to-start of this attempt
            w.metrics.task_started(w.task_queue, "activity", self.task["scheduled_time_ms"], started_ms)
        definition = w.definitions.get(self.task["activity_type"])
        converter = w.data_converter
        self.ctx = ActivityContext(info_from_task(self.task, started_ms, converter, w.namespace, self.key), self.heartbeat,
                                   is_async=definition is not None and definition.is_async)
        with w._lock:
            w._running.add(self)
        deadline = self._deadline(self.sent_at)
        if deadline is not None:
            w.overdue.begin(self, deadline - self.sent_at, f"activity {self.activity_id} attempt {self.number}",
                            self.sent_at)
        w.count("started")
        if definition is None:
            error = errors.ApplicationError(
                f"Activity function {self.task['activity_type']} is not registered on this worker, "
                f"available activities: {', '.join(sorted(w.definitions))}",
                type="NotFoundError", non_retryable=True)
            self._finish(A.FAIL, {"failure": failure_from_exception(error)})
            return
        try:  # input this converter cannot decode fails the attempt like any error
            result = converter.encode(self._call(definition, converter.decode_args(self.task["input"], call_types(definition.fn).parameters)))
        except _CompleteAsyncError:
            self._leave_to_async_completion()
        except errors.CancelledError as exc:
            if self.ctx.cancel_reason == CancelReason.CANCEL_REQUESTED:
                details = converter.encode_details(list(exc.details)) if exc.details else None
                self._finish(A.REPORT_CANCELED, {"details": details})
            else:
                self._finish(A.FAIL, {"failure": attempt_failure(exc, converter)})
        except BaseException as exc:  # any error fails the attempt, never the worker
            self.log.info("activity_raised", error=repr(exc))
            self._finish(A.FAIL, {"failure": attempt_failure(exc, converter)})
        else:
            self._finish(A.COMPLETE, {"result": result})

    def _start(self) -> int | None:
        """Send START until the engine answers (`confirm_start`): the attempt's start time, or
        None if refused or the worker stops first (then the task stays unsettled)."""
        w = self.worker  # (whether to hand the task over was decided before: `_run_attempt`)
        request_id = uuid.uuid4().hex
        self.sent_at = time.monotonic()
        reply = confirm_start(w.replies, request_id,
                              lambda: w.send(self.key, A.START, {"attempt": self.number, "identity": w.identity},
                                             request_id, urgent=True),
                              w._stop)
        if reply is None:
            return None
        self.settle()
        record = reply.record
        if record.record_type is RecordType.COMMAND_REJECTION:
            self.log.info("activity_start_rejected", rejection_type=record.rejection_type,
                          reason=record.rejection_reason)
            return None
        return record.value["started_time_ms"]

    # deadlines ----------------------------------------------------------------------------
    def _deadline(self, last_heartbeat: float) -> float | None:
        """When the engine gives this attempt up (monotonic): start-to-close from the START
        sent, or the heartbeat timeout from the last heartbeat, whichever is first."""
        deadlines = []
        if self.task["start_to_close_timeout_ms"] > 0:
            deadlines.append(self.sent_at + self.task["start_to_close_timeout_ms"] / 1000)
        if self.task["heartbeat_timeout_ms"] > 0:
            deadlines.append(last_heartbeat + self.task["heartbeat_timeout_ms"] / 1000)
        return min(deadlines) if deadlines else None

    def _call(self, definition: ActivityDefinition, args: tuple[Any, ...]) -> Any:
        if definition.is_async:
            future = asyncio.run_coroutine_threadsafe(_run_coroutine(self.ctx, definition.fn, args),
                                                      self.worker._loop)
            return future.result()
        executor = self.worker.activity_executor
        if executor is not None:  # the user's executor runs it (Temporal's activity_executor)
            return executor.submit(run_in_context, self.ctx, definition.fn, args).result()
        return run_in_context(self.ctx, definition.fn, args)

    # heartbeats ---------------------------------------------------------------------------
    def heartbeat(self, details: tuple[Any, ...]) -> None:
        """From activity code: sent now, or when the throttle allows."""
        encode_details = self.worker.data_converter.encode_details
        self._heartbeats.record(encode_details(list(details)))  # a TypeError belongs to the caller
        self._beat_at = time.monotonic()
        deadline = self._deadline(self._beat_at)
        if deadline is not None:
            self.worker.overdue.extend(self, deadline)

    def _send_heartbeat(self, details: str) -> None:
        self.worker.send(self.key, A.HEARTBEAT, {"attempt": self.number, "details": details},
                         on_reply=self._on_heartbeat_reply, ttl_s=120)

    def _on_heartbeat_reply(self, reply: Reply) -> bool:
        record = reply.record
        if record.record_type is RecordType.COMMAND_REJECTION:
            if record.rejection_type in _ATTEMPT_OVER:
                if self.ctx.cancel(CancelReason.ATTEMPT_OVER):
                    self.log.info("activity_attempt_over", reason=record.rejection_reason)
            else:
                self.log.warning("activity_heartbeat_rejected", rejection_type=record.rejection_type,
                                 reason=record.rejection_reason)
        elif record.value.get("cancel_requested") and self.ctx.cancel(CancelReason.CANCEL_REQUESTED):
            self.log.info("activity_cancel_requested")
        return True

    # answering ----------------------------------------------------------------------------
    def _leave_to_async_completion(self) -> None:
        """The function called `activity.raise_complete_async()`: no answer from this worker.
        The attempt stays started for the engine (its timeouts run) until someone answers
        with its task token or its ids; a heartbeat still pending goes out first."""
        pending = self._heartbeats.close()
        if pending is not NOTHING and self.ctx.cancel_reason is None:
            self._send_heartbeat(pending)
        self.log.info("activity_completing_async")
        self.worker.count("completing_async")

    def _finish(self, intent: str, value: dict[str, Any]) -> None:
        """Send the answer, after any heartbeat still pending; or drop it if the attempt is
        known to be over, or the worker stopped without it (the engine will time it out)."""
        pending = self._heartbeats.close()  # no heartbeat leaves after this
        reason = self.ctx.cancel_reason
        if reason in (CancelReason.ATTEMPT_OVER, CancelReason.WORKER_SHUTDOWN):
            self.log.warning("activity_result_dropped", answer=intent, reason=reason)
            self.worker.count("dropped")
            return
        if pending is not NOTHING:
            self._send_heartbeat(pending)
        value = {"attempt": self.number, **value}
        handed = getattr(self.worker, "workflow_tasks", None)  # test doubles may lack it
        self._takes_task = request_id = None
        if handed is not None and intent in (A.COMPLETE, A.FAIL):
            # The run's next workflow task rides back with the answer when the run is cached here
            # (heard after the answer's 120 s too: an engine may be away longer).
            self._takes_task = handed.ask_after_activity(value, self.task.get("run_id") or "")
            ride = getattr(handed, "ride_along", None)
            if intent == A.COMPLETE and ride is not None:
                if getattr(handed, "stopped", False) or self.worker.stopping():  # no answer runs ahead for a worker leaving
                    ride.skip("stopping")
                elif self._takes_task is None:  # not asked: the run is not cached here
                    ride.skip("not_cached")
                else:  # ... and, when the run is idle here, that task's answer rides with it (`ride_along`).
                    deadline = self._deadline(self._beat_at or self.sent_at)  # its wait in line ends before
                    # The function is done: its slot may go on to the run's next activity,
                    # asked to run eagerly in the answer (`ActivityWorker.hand_slot_on`).
                    hand_slot = functools.partial(self.worker.hand_slot_on, self)
                    self._takes_task = ride.ask(value, self.task, value.get("result"),
                                                hand_slot, deadline) or self._takes_task
            request_id = handed.request_id() if self._takes_task is not None else None
        self.worker.send(self.key, intent, value, request_id=request_id, on_reply=self._on_answer, ttl_s=120)
        self.worker.count(_SENT[intent])

    def _on_answer(self, reply: Reply) -> bool:
        # Only a refusal matters (an accepted FAIL that is retried gets no reply at all), and
        # the run's next workflow task when the engine hands it back.
        if self._takes_task is not None and self._takes_task(reply):
            return True
        record = reply.record
        if self._takes_task is not None and record.record_type is not RecordType.COMMAND_REJECTION:
            return False  # an eager activity of the answer that rode along: its verdict comes after
        if record.record_type is RecordType.COMMAND_REJECTION:
            self.log.warning("activity_answer_rejected", answer=record.intent,
                             rejection_type=record.rejection_type, reason=record.rejection_reason)
            self.worker.count("rejected")
        return True


async def _run_coroutine(ctx: ActivityContext, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    # The task runs in a copy of the loop's context: set the attempt there.
    set_current(ctx)
    loop, task = asyncio.get_running_loop(), asyncio.current_task()
    ctx.on_cancel(lambda: loop.call_soon_threadsafe(task.cancel))
    try:
        return await fn(*args)
    except asyncio.CancelledError:
        raise errors.CancelledError(f"activity cancelled: {ctx.cancel_reason}") from None
