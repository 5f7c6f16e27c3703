"""Answers to the clients that wait for a run's close (docs/workflow-protocol.md, "Waiting
for the result").

A START (or signal-with-start) may name a `close_reply`: a partition of the replies topic
and a request id. The engine keeps it with the run (`WorkflowRun.result_waiters`) and, in
the transaction that writes the run's close event, sends that same event there: the
starter learns the result from its own replies partition, without reading the events
topic. The next run of a chain (continue-as-new, retry, cron) takes over the waiters that
follow runs, so each close of the chain reaches them and its last one ends their wait.
WAIT_RESULT adds a waiter to a run any client names, or answers at once with the close
of a run that is closed (following the chain to its open or last run while the runs are
in state).

Limits: at most MAX_RESULT_WAITERS per run, one per request id (a repeated command finds
its waiter and adds nothing). A waiter is answered once per close whether its client still
listens or not, and nothing of it is kept after the chain's close. A run gone from state
cannot be waited for here (NOT_FOUND): its client reads the events topic instead.
"""

from __future__ import annotations

from typing import Any

import orjson

from streamproc.engine.processing import ProcessingContext
from streamproc.protocol.records import Record, ValueType
from streamproc.state.workflow_run import WorkflowRun
from streamproc.state.workflow_run_parts import ResultWaiter

__all__ = ["MAX_RESULT_WAITERS", "close_reply_problem", "close_reply_of", "wait_for_close", "answer_waiters",
           "history_record_value"]

#: Waiters one run keeps; a WAIT_RESULT beyond is refused (RESOURCE_EXHAUSTED).
MAX_RESULT_WAITERS = 64
#: Closed runs of a chain a WAIT_RESULT follows at once to reach the one still open.
MAX_RUNS_FOLLOWED = 100
MAX_REQUEST_ID_CHARS = 1000


def close_reply_problem(cmd: Record) -> str | None:
    """What is wrong with the command's `close_reply`, if anything."""
    target = cmd.value.get("close_reply")
    if target is None:
        return None
    if target["partition"] < 0:
        return f"close_reply.partition must be >= 0, got {target['partition']}"
    if not target["request_id"] or len(target["request_id"]) > MAX_REQUEST_ID_CHARS:
        return f"close_reply.request_id must be 1 to {MAX_REQUEST_ID_CHARS} characters"
    return None


def close_reply_of(cmd: Record) -> ResultWaiter | None:
    """The waiter a command names (checked with `close_reply_problem` first), or None."""
    target = cmd.value.get("close_reply")
    if target is None:
        return None
    return ResultWaiter(target["partition"], target["request_id"], target.get("follow_runs", True))


def history_record_value(run: WorkflowRun, event: dict[str, Any]) -> dict[str, Any]:
    """The value of the events-topic record of one history event of `run`; a waiter gets
    the same value for the close."""
    return {"workflow_id": run.workflow_id, "run_id": run.run_id, "workflow_type": run.workflow_type,
            "task_queue": run.task_queue, "event_id": event["event_id"], "event_time_ms": event["event_time_ms"],
            "attributes": orjson.dumps(event["attributes"]).decode()}


def wait_for_close(ctx: ProcessingContext, run_key: int, run: WorkflowRun,
                   waiter: ResultWaiter) -> tuple[WorkflowRun, bool] | None:
    """Register `waiter` on `run` if open, else answer it with the close now (after following
    the chain to its open run, for a waiter that follows runs). Returns the run waited on and
    whether it was closed; None when the open run has no room for another waiter."""
    for _ in range(MAX_RUNS_FOLLOWED):
        if run.is_open:
            if all(w.request_id != waiter.request_id for w in run.result_waiters):
                if len(run.result_waiters) >= MAX_RESULT_WAITERS:
                    return None
                run.result_waiters.append(waiter)
                ctx.workflows.put(run_key, run)
            return run, False
        found = ctx.workflows.find(run.workflow_id, run.new_execution_run_id) \
            if waiter.follow_runs and run.new_execution_run_id else None
        if found is None:
            break
        run_key, run = found
    last = run.next_event_id - 1
    (close_event,) = ctx.history.events(run_key, last, last)
    _answer(ctx, run_key, run, waiter, close_event)
    return run, True


def answer_waiters(ctx: ProcessingContext, run_key: int, run: WorkflowRun, close_event: dict[str, Any]) -> None:
    """The run wrote its close event: send it to every waiter, in this transaction. The
    waiters of a chain that goes on stay for the next run to take (`WorkflowRun.successor`)."""
    for waiter in run.result_waiters:
        _answer(ctx, run_key, run, waiter, close_event)
    if not close_event["attributes"].get("new_execution_run_id"):
        run.result_waiters = []


def _answer(ctx: ProcessingContext, run_key: int, run: WorkflowRun, waiter: ResultWaiter,
            close_event: dict[str, Any]) -> None:
    ctx.out.answer(waiter.reply_partition, waiter.request_id, ValueType.WORKFLOW, close_event["event_type"],
                   run_key, history_record_value(run, close_event))
