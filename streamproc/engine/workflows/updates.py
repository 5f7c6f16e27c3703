"""UPDATE: a change a caller asks of a running workflow, validated by its code first.

The engine admits the update (deduplicated by its update id, at most
`Limits.max_in_flight_updates` unfinished and `max_updates_per_run` in all, as Temporal)
and carries it to the code in the next workflow task: a *speculative* one if no task is
out, whose Scheduled is written only if the task completes with more than rejections.
The worker answers with commands: ACCEPT_UPDATE (WORKFLOW_EXECUTION_UPDATE_ACCEPTED),
COMPLETE_UPDATE (WORKFLOW_EXECUTION_UPDATE_COMPLETED, the handler's result or failure),
or REJECT_UPDATE (the validator refused: no event, so a rejected update leaves no
history). Each caller is answered at the stage it asked for (ACCEPTED or COMPLETED); the
same update id sent again joins the waiters, or gets the recorded outcome at once.
POLL_UPDATE does the same for a caller that knows only the update id (another client,
another process): Temporal's PollWorkflowExecutionUpdate, answered when the outcome is.
"""

from __future__ import annotations

from typing import Any

from streamproc.engine.processing import ProcessingContext
from streamproc.engine.validation import check_json
from streamproc.engine.workflows.requests import find_run, valid_run
from streamproc.engine.workflows.runs import BACKOFF_START, E, RunWriter
from streamproc.engine.workflows.update_answers import ACCEPTED, COMPLETED, answer_waiters, update_failure
from streamproc.protocol.failures import check_failure_record
from streamproc.protocol.records import Record, RejectionType, WorkflowIntent
from streamproc.semantics import InvalidArgument
from streamproc.state.workflow_run import WorkflowRun
from streamproc.state.workflow_run_parts import RunUpdate

#: Callers one unfinished update keeps waiting (as a run keeps its result waiters); a
#: POLL_UPDATE beyond is refused (RESOURCE_EXHAUSTED).
MAX_UPDATE_WAITERS = 64

__all__ = ["update", "poll_update", "check_accept", "check_complete", "check_reject", "accept", "complete", "reject",
           "reject_unhandled"]


def _problem(ctx: ProcessingContext, v: dict[str, Any]) -> str | None:
    if not v["update_id"]:
        return "UpdateId is not set on request."
    if not v["update_name"]:
        return "Update name is not set on request."
    if v["update_stage"] not in ("", ACCEPTED, COMPLETED):
        return f"update_stage must be ACCEPTED or COMPLETED, got {v['update_stage']!r}"
    return check_json(v["input"] if v["input"] is not None else "null", "update input", ctx.limits.max_payload_bytes)


def update(cmd: Record, ctx: ProcessingContext) -> None:
    v = cmd.value
    found = valid_run(cmd, ctx, _problem(ctx, v), running=False)
    if found is None:
        return
    run_key, run = found
    update_id, stage = v["update_id"], v["update_stage"] or COMPLETED
    waiter = [cmd.request_id or "", cmd.reply_partition, stage]
    existing = run.updates.get(update_id)
    if existing is not None:
        _join(ctx, run_key, run, update_id, existing, waiter)
    elif not run.is_open:
        find_run(cmd, ctx, running=True)  # rejects: already completed
        return
    elif run.in_flight_updates() >= ctx.limits.max_in_flight_updates:
        ctx.out.reject(cmd, RejectionType.INVALID_ARGUMENT, "limit on number of concurrent in-flight updates has "
                                                            f"been reached ({ctx.limits.max_in_flight_updates})")
        return
    elif len(run.updates) >= ctx.limits.max_updates_per_run:
        ctx.out.reject(cmd, RejectionType.INVALID_ARGUMENT, "limit on number of total updates has been reached "
                                                            f"({ctx.limits.max_updates_per_run})")
        return
    else:
        run.updates[update_id] = RunUpdate(v["update_name"], v["input"], v["identity"],
                                           waiters=[waiter] if cmd.reply_partition >= 0 else [])
        if BACKOFF_START in run.deadlines:
            # Its first task, now and not speculative: it must be written whatever the
            # validator says, the run's code has to start (as on a Temporal server).
            RunWriter(ctx, run_key, run).end_backoff_now()
        elif run.task is None:
            RunWriter(ctx, run_key, run).schedule_task(speculative=True)
    ctx.workflows.put(run_key, run)


def poll_update(cmd: Record, ctx: ProcessingContext) -> None:
    """The caller waits for the outcome of update `update_id` of the run, at its stage:
    answered now if it is there, else when it is. A run that closed keeps the outcomes of
    its completed updates; a rejected update left nothing, so it is not found, as in
    Temporal (`update "<id>" not found`)."""
    v = cmd.value
    problem = ("UpdateId is not set on request." if not v["update_id"] else None) or (
        None if v["update_stage"] in ("", ACCEPTED, COMPLETED)
        else f"update_stage must be ACCEPTED or COMPLETED, got {v['update_stage']!r}") or (
        None if cmd.reply_partition >= 0 else "POLL_UPDATE needs a reply partition: its answer is only ever a reply")
    found = valid_run(cmd, ctx, problem, running=False)
    if found is None:
        return
    run_key, run = found
    update_id = v["update_id"]
    existing = run.updates.get(update_id)
    if existing is None:
        ctx.out.reject(cmd, RejectionType.NOT_FOUND, f'update "{update_id}" not found')
        return
    waiter = [cmd.request_id or "", cmd.reply_partition, v["update_stage"] or COMPLETED]
    if existing.state != COMPLETED and waiter not in existing.waiters \
            and len(existing.waiters) >= MAX_UPDATE_WAITERS:
        ctx.out.reject(cmd, RejectionType.RESOURCE_EXHAUSTED,
                       f"update {update_id!r} already has {MAX_UPDATE_WAITERS} callers waiting for its outcome")
        return
    _join(ctx, run_key, run, update_id, existing, waiter)
    ctx.workflows.put(run_key, run)


def _join(ctx: ProcessingContext, run_key: int, run: WorkflowRun, update_id: str, existing: RunUpdate,
          waiter: list) -> None:
    """The same update id again: answer from where it stands, or wait with the others."""
    if existing.state == COMPLETED:
        (event,) = ctx.history.events(run_key, existing.completed_event_id, existing.completed_event_id)
        existing.waiters.append(waiter)
        answer_waiters(ctx, run_key, run, update_id, existing, WorkflowIntent.UPDATE_COMPLETED, (ACCEPTED, COMPLETED),
                       **_outcome_fields(event["attributes"]["outcome"]))
    elif existing.state == ACCEPTED and waiter[2] == ACCEPTED:
        existing.waiters.append(waiter)
        answer_waiters(ctx, run_key, run, update_id, existing, WorkflowIntent.UPDATE_ACCEPTED, (ACCEPTED,))
    elif waiter[1] >= 0 and waiter not in existing.waiters:  # a caller that asks again waits once
        existing.waiters.append(waiter)


# -- the worker's answers, as commands of a completed workflow task ------------------------

def _state(run: WorkflowRun, still_open: Any, update_id: object) -> str | None:
    if not isinstance(update_id, str):
        raise InvalidArgument(f"update_id must be a string, got {update_id!r}")
    states = still_open.update_states
    if update_id not in states:
        raise InvalidArgument(f"no update with UpdateId {update_id!r} was sent to this run")
    return states[update_id]


def check_accept(ctx: ProcessingContext, run: WorkflowRun, c: dict, still_open: Any) -> dict[str, Any]:
    if _state(run, still_open, c.get("update_id")) != "ADMITTED":
        raise InvalidArgument(f"update {c['update_id']!r} cannot be accepted: it is {run.updates[c['update_id']].state}")
    still_open.update_states[c["update_id"]] = ACCEPTED
    return {"update_id": c["update_id"]}


def check_complete(ctx: ProcessingContext, run: WorkflowRun, c: dict, still_open: Any) -> dict[str, Any]:
    if _state(run, still_open, c.get("update_id")) != ACCEPTED:
        raise InvalidArgument(f"update {c['update_id']!r} cannot complete: it was not accepted")
    if c.get("failure") is not None:
        problem = check_failure_record(c["failure"])
        outcome = {"failure": c["failure"]}
    else:
        problem = check_json(c.get("result") if c.get("result") is not None else "null", "update result",
                             ctx.limits.max_payload_bytes)
        outcome = {"success": c.get("result")}
    if problem:
        raise InvalidArgument(problem)
    still_open.update_states[c["update_id"]] = COMPLETED
    return {"update_id": c["update_id"], "outcome": outcome}


def check_reject(ctx: ProcessingContext, run: WorkflowRun, c: dict, still_open: Any) -> dict[str, Any]:
    if _state(run, still_open, c.get("update_id")) != "ADMITTED":
        raise InvalidArgument(f"update {c['update_id']!r} cannot be rejected: it was accepted")
    problem = check_failure_record(c.get("failure"))
    if problem:
        raise InvalidArgument(problem)
    del still_open.update_states[c["update_id"]]
    return {"update_id": c["update_id"], "failure": c["failure"]}


def accept(w: RunWriter, a: dict, completed_id: int, eager_for: str | None) -> bool:
    update_id = a["update_id"]
    entry = w.run.updates[update_id]
    entry.state = ACCEPTED
    # The task's Scheduled, Started and Completed are consecutive ids: nothing is appended
    # while a task is out, and a speculative task's three are written together.
    entry.accepted_event_id = w.append(E.WORKFLOW_EXECUTION_UPDATE_ACCEPTED, {
        "protocol_instance_id": update_id, "accepted_request_message_id": f"{update_id}/request",
        "accepted_request_sequencing_event_id": completed_id - 2,
        "accepted_request": {"meta": {"update_id": update_id, "identity": entry.identity},
                             "input": {"name": entry.name, "args": entry.input}}})
    answer_waiters(w.ctx, w.key, w.run, update_id, entry, WorkflowIntent.UPDATE_ACCEPTED, (ACCEPTED,))
    return False


def complete(w: RunWriter, a: dict, completed_id: int, eager_for: str | None) -> bool:
    update_id = a["update_id"]
    entry = w.run.updates[update_id]
    entry.state = COMPLETED
    entry.completed_event_id = w.append(E.WORKFLOW_EXECUTION_UPDATE_COMPLETED, {
        "meta": {"update_id": update_id, "identity": entry.identity}, "update_id": update_id,
        "accepted_event_id": entry.accepted_event_id, "outcome": a["outcome"]})
    entry.input = None  # the outcome is in history; the input is in the accepted event
    answer_waiters(w.ctx, w.key, w.run, update_id, entry, WorkflowIntent.UPDATE_COMPLETED, (ACCEPTED, COMPLETED),
                   **_outcome_fields(a["outcome"]))
    return False


def _outcome_fields(outcome: dict[str, Any]) -> dict[str, Any]:
    """An UPDATE_COMPLETED answer's fields: `result` (the success payload) or `failure`."""
    return {"failure": outcome["failure"]} if "failure" in outcome else {"result": outcome["success"]}


def reject(w: RunWriter, a: dict, completed_id: int, eager_for: str | None) -> bool:
    entry = w.run.updates.pop(a["update_id"])
    answer_waiters(w.ctx, w.key, w.run, a["update_id"], entry, WorkflowIntent.UPDATE_REJECTED, (ACCEPTED, COMPLETED),
                   failure=a["failure"])
    return False


def reject_unhandled(w: RunWriter, carried: list[str]) -> None:
    """Updates a completed task carried that its answer neither accepted nor rejected:
    the code did not take them (an SDK without update support), so they fail."""
    for update_id in carried:
        entry = w.run.updates.get(update_id)
        if entry is not None and entry.state == "ADMITTED":
            reject(w, {"update_id": update_id, "failure": update_failure(
                f"update {entry.name!r} ({update_id}) was not handled by the workflow", "UpdateNotHandled")},
                   0, None)
