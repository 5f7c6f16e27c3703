"""The next workflow task rides with an activity's completion (issue 20, item 4).

A worker that ran a run's activity and has the run cached, idle, runs the workflow code on
the activity's result before sending the COMPLETE, as the next task would, and puts that
task's answer in the COMPLETE (`workflow_task_answer`). The engine applies the completion;
then, only if the run is exactly where the worker assumed, it writes in the same batch what
the normal path writes in two: WORKFLOW_TASK_SCHEDULED, _STARTED, _COMPLETED and the
answer's command events, in Temporal's order. "Exactly where": the run is open, no task is
out or waiting out a backoff, nothing is buffered and no update or query waits; its last
completed task is the one the worker's cache answered (`return_workflow_task_after`), and
it was this worker's answer that completed it (`task_answered_by`: another worker may have
answered the same task too, and its instance kept commands the engine never took); and
its next event id is the one the worker names, so no event came in between (a signal, a
timer, another activity's close, a cancel request: each of those schedules a task, which
moves the run's last completed task on or leaves one out). The answer's commands are
checked as a task's are.

Otherwise the answer is refused and the completion goes on as without it (`deliver`: the
task is scheduled and handed back). The worker hears which with RODE_ALONG (accepted or
not), the first reply to the COMPLETE; accepted, it carries the task's
WORKFLOW_TASK_SCHEDULED as written, whose time only the engine knew (the worker's code did
not read it, or it would not have sent an answer), and is followed by the replies a
TASK_COMPLETE gets (eager activity tasks, then the handed-back task or TASK_PROCESSED).
The task is answered in the batch that schedules it: no deadline is armed for it, and no
task record is written.
"""

from __future__ import annotations

from typing import Any

import orjson

from streamproc.engine.workflows.commands import BadCommand, validate
from streamproc.engine.workflows.runs import BACKOFF_START, E, RunWriter, scheduled_attributes
from streamproc.engine.workflows.tasks import FORCE_NEW_TASK, RETURN_NEW_TASK, asked_eager, finish_task
from streamproc.protocol.records import ValueType, WorkflowIntent
from streamproc.state.workflow_run_parts import PendingEvent, WorkflowTaskOut

__all__ = ["deliver_with_answer"]


def deliver_with_answer(writer: RunWriter, events: list[PendingEvent], hand_back_after: int,
                        answer_json: str) -> None:
    """The activity's close `events`, with the next task's answer ridden along when the run
    is where the worker's answer assumed; else as `RunWriter.deliver` would."""
    run = writer.run
    answer = _parse(answer_json)
    refusal = "the answer is not a JSON object with next_event_id and commands" if answer is None \
        else _refusal(writer, hand_back_after, answer["next_event_id"], answer["identity"])
    if refusal is not None:
        _verdict(writer, accepted=False, reason=refusal)
        writer.deliver(events, hand_back_after)
        return
    writer.append_all(events)
    try:
        validated = validate(writer.ctx, run, answer["commands"])
    except BadCommand as bad:  # the task the worker then runs fails it as it should
        _verdict(writer, accepted=False, reason=f"{bad.cause}: {bad.message}")
        writer.schedule_task(hand_back=True)
        return
    ctx = writer.ctx
    attributes = scheduled_attributes(run, 1)
    scheduled_id = writer.append(E.WORKFLOW_TASK_SCHEDULED, attributes)
    scheduled = {"event_id": scheduled_id, "event_type": E.WORKFLOW_TASK_SCHEDULED.name,
                 "event_time_ms": ctx.now_ms, "attributes": attributes}
    run.task = WorkflowTaskOut(scheduled_id, 1, ctx.now_ms, transient=False)
    # First: the worker caches its instance again before the eager activities it runs next end.
    _verdict(writer, accepted=True, scheduled=scheduled)
    flags = answer["attributes"]
    finish_task(writer, validated, answer["identity"], [], force_new=flags.get(FORCE_NEW_TASK) is True,
                return_new=flags.get(RETURN_NEW_TASK) is True)
    if asked_eager(answer["commands"]) and not (run.task is not None and run.task.handed_back):
        # As after a TASK_COMPLETE: the eager activity tasks came, the slots not filled are free.
        ctx.out.reply(ValueType.WORKFLOW, WorkflowIntent.TASK_PROCESSED, writer.key, {
            "workflow_id": run.workflow_id, "run_id": run.run_id, "scheduled_event_id": scheduled_id})


def _refusal(writer: RunWriter, hand_back_after: int, next_event_id: int, identity: str) -> str | None:
    """Why the run is not where the worker's answer assumed (None: it is)."""
    run = writer.run
    if not writer.ctx.out.caller_listens or hand_back_after <= 0:
        return "the completion does not ask for the next task"
    if not run.is_open:
        return f"the run is {run.status.name}"
    if run.task is not None:
        return f"workflow task {run.task.scheduled_event_id} is out"
    if BACKOFF_START in run.deadlines:
        return "the run waits out its first task's backoff"
    if run.task_history_from != hand_back_after or run.task_attempt != 1:
        return (f"the run's last completed task is {run.task_history_from}, the worker's cache is at "
                f"{hand_back_after}")
    if run.task_answered_by != identity:
        # Two workers may both have answered that task (redelivered after a rebalance):
        # only the one whose answer the engine kept holds an instance that is the run.
        return f"the run's last completed task was answered by {run.task_answered_by!r}, not {identity!r}"
    if run.next_event_id != next_event_id:
        return f"the run's next event id is {run.next_event_id}, the worker's cache assumed {next_event_id}"
    if run.buffered or run.admitted_updates() or run.waiting_queries:
        return "events, updates or queries wait for a task"
    return None


def _parse(answer_json: str) -> dict[str, Any] | None:
    try:
        answer = orjson.loads(answer_json)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(answer, dict) or not isinstance(answer.get("next_event_id"), int) \
            or not isinstance(answer.get("commands"), list) or not isinstance(answer.get("identity", ""), str):
        return None
    flags = answer.get("attributes") or {}
    return {"next_event_id": answer["next_event_id"], "commands": answer["commands"],
            "identity": answer.get("identity", ""), "attributes": flags if isinstance(flags, dict) else {}}


def _verdict(writer: RunWriter, *, accepted: bool, reason: str = "", scheduled: dict[str, Any] | None = None) -> None:
    run = writer.run
    value = {"workflow_id": run.workflow_id, "run_id": run.run_id,
             "attributes": orjson.dumps({"accepted": accepted, "reason": reason}).decode()}
    if scheduled is not None:
        value["scheduled_event_id"] = scheduled["event_id"]
        value["history"] = orjson.dumps([scheduled]).decode()
    writer.ctx.out.reply(ValueType.WORKFLOW, WorkflowIntent.RODE_ALONG, writer.key, value)
