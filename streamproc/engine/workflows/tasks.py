"""Answers to workflow tasks (TASK_COMPLETE, TASK_FAIL), the markers journaled while one
is out (JOURNAL_MARKERS, `journaled_markers`) and their timeout (TASK_TIME_OUT).

An answer is for the task it names (scheduled_event_id, and attempt when given: the
attempts of a transient task share their scheduled id) of an open run; anything else is
stale and rejected. WORKFLOW_TASK_STARTED is written when the answer arrives, right
before the task's end event (there is no start round trip).
"""

from __future__ import annotations

import orjson

from streamproc.engine.processing import ProcessingContext
from streamproc.engine.workflows import journaled_markers, updates
from streamproc.engine.workflows.commands import BadCommand, apply, validate
from streamproc.engine.workflows.runs import TASK_TIME_OUT, E, RunWriter
from streamproc.protocol.failures import check_failure_record
from streamproc.protocol.records import Record, RejectionType, ValueType, WorkflowIntent
from streamproc.protocol.workflow_commands import WorkflowCommandType
from streamproc.semantics import InvalidArgument
from streamproc.semantics.enums import TimeoutType
from streamproc.semantics.workflow_timeout_outcomes import fail_workflow_task, fire_workflow_task_timeout
from streamproc.state.workflow_run import WorkflowRun


def _task_run(cmd: Record, ctx: ProcessingContext, verb: str, any_task: bool = False) -> WorkflowRun | None:
    """The open run whose task the command answers (`any_task`: whichever task is out, for
    a timeout, which names its deadline instead), or None after rejecting it."""
    run = ctx.workflows.get(cmd.key)
    scheduled_id = cmd.value["scheduled_event_id"]
    if any_task and run is not None and run.task is not None:
        scheduled_id = run.task.scheduled_event_id
    prefix = f"Expected to {verb} workflow task {scheduled_id} of run with key '{cmd.key}', but"
    if run is None:
        ctx.out.reject(cmd, RejectionType.NOT_FOUND, f"{prefix} no such run exists")
    elif not run.is_open:
        ctx.out.reject(cmd, RejectionType.INVALID_STATE,
                       f"{prefix} workflow execution already completed (status {run.status.name})")
    elif run.task is None or run.task.scheduled_event_id != scheduled_id or (
            not any_task and cmd.value["attempt"] not in (0, run.task.attempt)):
        out = f"{run.task.scheduled_event_id} attempt {run.task.attempt}" if run.task else None
        ctx.out.reject(cmd, RejectionType.INVALID_STATE,
                       f"{prefix} that task is over (the task out now is {out})")
    else:
        return run
    return None


def task_complete(cmd: Record, ctx: ProcessingContext) -> None:
    run = _task_run(cmd, ctx, "complete")
    if run is None:
        return
    try:
        commands = orjson.loads(cmd.value["commands"] or "[]")
    except orjson.JSONDecodeError as exc:
        ctx.out.reject(cmd, RejectionType.INVALID_ARGUMENT, f"commands is not valid JSON: {exc}")
        return
    identity = cmd.value["identity"]
    flags = _flags(cmd)
    scheduled_before = run.task.scheduled_event_id
    writer = RunWriter(ctx, cmd.key, run)
    try:
        validated = validate(ctx, run, commands)
    except BadCommand as bad:
        fail_task(writer, bad.cause, {"message": bad.message, "kind": "APPLICATION", "type": bad.cause,
                                      "non_retryable": False}, identity)
    else:
        carried = list(run.task.updates)
        if run.task.speculative and all(kind is WorkflowCommandType.REJECT_UPDATE for kind, _ in validated) \
                and flags.get(FORCE_NEW_TASK) is not True and not run.journaled_markers:
            _drop_speculative_task(writer, validated)
        else:
            finish_task(writer, validated, identity, carried, force_new=flags.get(FORCE_NEW_TASK) is True,
                        return_new=flags.get(RETURN_NEW_TASK) is True)
    ctx.workflows.put(cmd.key, run)
    # The last answer to a worker that asked for eager activities: the activity tasks it got
    # (if any) came before, so it can give back the slots it held for the others. A task
    # handed back is the last answer itself; a worker that only asked for one needs no
    # answer when none comes.
    handed_back = run.task is not None and run.task.handed_back and run.task.scheduled_event_id != scheduled_before
    if asked_eager(commands) and not handed_back:
        ctx.out.reply(ValueType.WORKFLOW, WorkflowIntent.TASK_PROCESSED, cmd.key, {
            "workflow_id": run.workflow_id, "run_id": run.run_id,
            "scheduled_event_id": cmd.value["scheduled_event_id"]})


def finish_task(writer: RunWriter, validated: list, identity: str, carried: list[str], *, force_new: bool,
                return_new: bool) -> None:
    """The task out is answered with `validated` commands: WORKFLOW_TASK_STARTED and
    _COMPLETED, each command's events, then what was buffered and the next task if
    anything needs the workflow (handed back when `return_new`). `carried`: the updates
    the task carried."""
    ctx, run = writer.ctx, writer.run
    # Before the task ends: the updates it did not carry (its own are still ADMITTED).
    nothing_new = not run.buffered and not run.admitted_updates()
    handed_back = run.task.handed_back
    scheduled_id, started_id = writer.end_task(identity)
    if handed_back and nothing_new:
        # Queries that came while it was out saw nothing new since: its worker answers
        # them with the state its answer left (see `queries.py`).
        writer.send_waiting_queries()
    completed_id = writer.append(_COMPLETED, {
        "scheduled_event_id": scheduled_id, "started_event_id": started_id, "identity": identity})
    run.task_attempt = 1
    run.task_history_from = scheduled_id  # the next task shows the worker what follows its answer
    run.task_answered_by = identity
    eager_for = identity if ctx.out.caller_listens else None
    journaled_markers.forget(run)  # the answer carries every marker of the task
    needs_task = apply(writer, validated, completed_id, eager_for)
    if run.is_open:
        updates.reject_unhandled(writer, carried)
        if writer.flush_buffer() or needs_task or run.admitted_updates() or force_new:
            # As in Temporal, the new task (whatever made it: the worker's heartbeat,
            # buffered events) goes straight back to the worker that asked for it;
            # unless queries wait for it: through the queue, they go right after it
            # on its partition (handed back, they would wait for the task after it).
            writer.schedule_task(hand_back=return_new and not run.waiting_queries)


def journal_markers(cmd: Record, ctx: ProcessingContext) -> None:
    """Markers of the task out, kept with the run until it completes (`journaled_markers`)."""
    run = _task_run(cmd, ctx, "journal markers for")
    if run is None:
        return
    try:
        kept = journaled_markers.check_journal(ctx, run, orjson.loads(cmd.value["commands"] or "[]"),
                                               _flags(cmd).get("journaled_before"), cmd.value["identity"])
    except orjson.JSONDecodeError as exc:
        ctx.out.reject(cmd, RejectionType.INVALID_ARGUMENT, f"commands is not valid JSON: {exc}")
        return
    except InvalidArgument as exc:
        ctx.out.reject(cmd, RejectionType.INVALID_ARGUMENT, str(exc))
        return
    except journaled_markers.JournalGap as exc:
        ctx.out.reject(cmd, RejectionType.INVALID_STATE, str(exc))
        return
    if kept != run.journaled_markers:
        run.journaled_markers, run.journaled_by = kept, cmd.value["identity"]
        ctx.workflows.put(cmd.key, run)


def asked_eager(commands: object) -> bool:
    return isinstance(commands, list) and any(isinstance(c, dict) and c.get("request_eager_execution")
                                              for c in commands)


#: The worker asks for a new task whatever happens (Temporal's force_create_new_workflow_task):
#: its local activities are still running, and this answer is a workflow task heartbeat that
#: keeps the run's task out (or, checkpointing, it records a step before the next).
FORCE_NEW_TASK = "force_create_new_workflow_task"
_COMPLETED = E.WORKFLOW_TASK_COMPLETED  # looked up once: a member's lookup on its class is a call
#: The worker asks for the next task, if the answer makes one, as a reply (Temporal's
#: return_new_workflow_task): it has the run cached and runs it without the task queue.
RETURN_NEW_TASK = "return_new_workflow_task"


def _flags(cmd: Record) -> dict:
    """The answer's attributes (read once: each flag is asked for), {} when unreadable."""
    raw = cmd.value.get("attributes")
    if not raw:
        return {}
    try:
        attributes = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {}
    return attributes if isinstance(attributes, dict) else {}


def _drop_speculative_task(writer: RunWriter, rejections: list) -> None:
    """A task scheduled only for updates, whose answer rejected every one: it leaves no
    event (Temporal's speculative task). What came in meanwhile gets a task of its own."""
    run = writer.run
    carried = list(run.task.updates)
    writer.ctx.workflow_timers.disarm(writer.key, run, TASK_TIME_OUT)
    run.task = None
    apply(writer, rejections, 0)
    updates.reject_unhandled(writer, carried)
    if run.buffered:
        writer.flush_buffer()
        writer.schedule_task()
    elif run.admitted_updates():
        writer.schedule_task(speculative=True)


def fail_task(writer: RunWriter, cause: str, failure: dict | None, identity: str) -> None:
    """WORKFLOW_TASK_FAILED (none for a transient attempt), then what was buffered and the
    next attempt (SEMANTICS 3.4)."""
    attempt = writer.run.task.attempt
    # Its code failed (it may be changed before the next attempt): its steps run again.
    journaled_markers.forget(writer.run)
    writer.end_failed_task(identity, E.WORKFLOW_TASK_FAILED, {"cause": cause, "failure": failure, "identity": identity})
    writer.retry_task(fail_workflow_task(attempt=attempt, sticky=False).next_attempt)


def task_fail(cmd: Record, ctx: ProcessingContext) -> None:
    run = _task_run(cmd, ctx, "fail")
    if run is None:
        return
    failure = cmd.value["failure"]
    problem = check_failure_record(failure) if failure is not None else None
    if problem:
        ctx.out.reject(cmd, RejectionType.INVALID_ARGUMENT, problem)
        return
    fail_task(RunWriter(ctx, cmd.key, run), cmd.value["cause"] or "UNSPECIFIED", failure, cmd.value["identity"])
    ctx.workflows.put(cmd.key, run)


def task_time_out(cmd: Record, ctx: ProcessingContext) -> None:
    """From the checker: re-checked against the task out now and its armed deadline."""
    run = _task_run(cmd, ctx, "time out", any_task=True)
    if run is None:
        return
    due = cmd.value["due_ms"]
    if run.deadlines.get(TASK_TIME_OUT) != due or due > ctx.now_ms:
        ctx.out.reject(cmd, RejectionType.INVALID_STATE,
                       f"Expected to time out workflow task {run.task.scheduled_event_id} at {due}, "
                       f"but its deadline is {run.deadlines.get(TASK_TIME_OUT)} (now {ctx.now_ms})")
        return
    retry = fire_workflow_task_timeout(TimeoutType.START_TO_CLOSE, attempt=run.task.attempt, sticky=False)
    writer = RunWriter(ctx, cmd.key, run)
    writer.end_failed_task("", E.WORKFLOW_TASK_TIMED_OUT, {"timeout_type": retry.timeout_type.name})
    writer.retry_task(retry.next_attempt)
    ctx.workflows.put(cmd.key, run)
