"""QUERY: read a workflow's state through its code, without writing anything.

The engine only checks the run (it exists; the caller's reject condition; the query is
well formed) and hands the query to the run's task queue as a QUERY_TASK, on the task
partition of the workflow id, where the worker that has the run cached usually is. The
worker runs the query handler and answers the caller directly on its replies partition
(QUERY_ANSWERED); no history event, no state change, as in Temporal. A query that the
reject condition refuses is answered QUERY_REJECTED with the run's status.

Consistency: a query task goes to the workflow's task partition after every workflow task
the engine wrote before it, so the worker applies those first (a signal then a query
sees the signal). Events buffered while a task is out reach the code only with the next
task: a query that arrives then waits in the run's state and goes out right after that
task (or when the run closes), as Temporal holds a query until the task in flight ends.
So does a query that arrives while a task handed back to its worker is out (it went to the
worker's replies partition, not before the query on the task partition): it goes out when
that task completes; or, if events were buffered or an update admitted meanwhile, right
after the next task, which then goes through the queue rather than back to the worker.
A run waiting out its first-task backoff (a delayed start, a cron run before its time)
has run no code yet: its query is refused at once (INVALID_STATE), as Temporal refuses it.
"""

from __future__ import annotations

import orjson

from streamproc.engine.processing import ProcessingContext
from streamproc.engine.validation import check_json
from streamproc.engine.workflows.requests import valid_run
from streamproc.engine.workflows.runs import BACKOFF_START, WF, send_query_tasks
from streamproc.protocol.records import Record, RejectionType, WorkflowIntent
from streamproc.semantics.workflow_ids import QueryRejectCondition

__all__ = ["query", "WORKFLOW_TASK_NOT_SCHEDULED"]

#: Temporal's answer to a query for a run waiting out its first-task backoff.
WORKFLOW_TASK_NOT_SCHEDULED = "Workflow task is not scheduled yet."


def _problem(ctx: ProcessingContext, cmd: Record) -> str | None:
    v = cmd.value
    if not v["query_type"]:
        return "QueryType is not set on request."
    allowed = [c.name for c in QueryRejectCondition if c]
    if v["query_reject_condition"] and v["query_reject_condition"] not in allowed:
        return f"query_reject_condition must be one of {', '.join(allowed)}, got {v['query_reject_condition']!r}"
    if cmd.reply_partition < 0:
        return "a query needs a reply partition: its answer is only ever a reply"
    return check_json(v["input"] if v["input"] is not None else "null", "query input", ctx.limits.max_payload_bytes)


def query(cmd: Record, ctx: ProcessingContext) -> None:
    found = valid_run(cmd, ctx, _problem(ctx, cmd), running=False)
    if found is None:
        return
    run_key, run = found
    v = cmd.value
    condition = QueryRejectCondition[v["query_reject_condition"] or "NONE"]
    if condition.rejects(run.status):
        ctx.out.reply(WF, WorkflowIntent.QUERY_REJECTED, run_key, {
            "workflow_id": run.workflow_id, "run_id": run.run_id,
            "attributes": orjson.dumps({"status": run.status.name}).decode()})
        return
    if run.is_open and BACKOFF_START in run.deadlines:
        # No task yet (a start delay, a cron time, a retry backoff): there is no state to
        # ask, and no worker holds the run. Temporal refuses at once, in these words.
        ctx.out.reject(cmd, RejectionType.INVALID_STATE, WORKFLOW_TASK_NOT_SCHEDULED)
        return
    waiting = {"query_type": v["query_type"], "input": v["input"], "request_id": cmd.request_id or "",
               "reply_partition": cmd.reply_partition}
    if run.is_open and run.task is not None and (run.buffered or run.admitted_updates() or run.task.handed_back):
        run.waiting_queries.append(waiting)
        ctx.workflows.put(run_key, run)
    else:
        send_query_tasks(ctx, run_key, run, [waiting])
