"""Schedule processors, one per intent (Temporal's Schedules, SEMANTICS.md 8).

Each validates, changes the `StoredSchedule` through the state and `actions`, and writes
its event; a refused command becomes a rejection with the reason and nothing changes.
"""

from __future__ import annotations

from typing import Any

import orjson

from streamproc.engine.processing import ProcessingContext, Processor
from streamproc.engine.schedules import actions
from streamproc.engine.schedules.definition import check_memo, overlap_policy, parse_definition
from streamproc.engine.schedules.description import describe, summary
from streamproc.engine.validation import json_object
from streamproc.protocol.records import Record, RejectionType, ScheduleIntent, ValueType
from streamproc.semantics import InvalidArgument
from streamproc.semantics.schedule_overlap import ScheduleOverlapPolicy
from streamproc.state.schedules import StoredSchedule

SC = ValueType.SCHEDULE
#: Temporal's answer to a CreateSchedule for an id in use.
ALREADY_REGISTERED = "schedule with this ID is already registered"
#: Schedules one LIST answer holds at most (a client asks again after the last id).
LIST_PAGE = 100
#: The longest schedule id (Temporal's id length limit).
MAX_SCHEDULE_ID_LENGTH = 1000


def _found(cmd: Record, ctx: ProcessingContext) -> StoredSchedule | None:
    schedule = ctx.schedules.get(cmd.value["schedule_id"]) if cmd.value["schedule_id"] else None
    if schedule is None:
        ctx.out.reject(cmd, RejectionType.NOT_FOUND, f"schedule not found: {cmd.value['schedule_id']!r}")
    return schedule


def _attributes(cmd: Record) -> dict[str, Any]:
    return json_object(cmd.value["attributes"], "attributes")


def _recorded(ctx: ProcessingContext, intent: str, of: StoredSchedule, **value: Any) -> None:
    ctx.out.event(SC, intent, -1, {"schedule_id": of.schedule_id, **value})


def _definition_json(schedule: StoredSchedule) -> str:
    return orjson.dumps({"action": schedule.action, "spec": schedule.spec, "policy": schedule.policy,
                         "state": {"paused": schedule.paused, "note": schedule.note,
                                   "limited_actions": schedule.limited_actions,
                                   "remaining_actions": schedule.remaining_actions}}).decode()


def create(cmd: Record, ctx: ProcessingContext) -> None:
    v = cmd.value
    schedule_id = v["schedule_id"]
    existing = ctx.schedules.get(schedule_id) if schedule_id else None
    if existing is not None:
        if cmd.request_id and existing.request_id == cmd.request_id:  # the same CREATE, sent again
            ctx.out.reply(SC, ScheduleIntent.CREATED, -1, {"schedule_id": schedule_id,
                                                           "conflict_token": existing.conflict_token})
        else:
            ctx.out.reject(cmd, RejectionType.ALREADY_EXISTS, ALREADY_REGISTERED)
        return
    try:
        if not schedule_id:
            raise InvalidArgument("schedule id is not set on request")
        if len(schedule_id.encode()) > MAX_SCHEDULE_ID_LENGTH:
            raise InvalidArgument(f"schedule id exceeds maximum allowed length "
                                  f"({len(schedule_id.encode())}/{MAX_SCHEDULE_ID_LENGTH})")
        definition = parse_definition(ctx, v["schedule"])
        attributes = _attributes(cmd)
        patch = _parse_patch(v["patch"])
        schedule = StoredSchedule(
            schedule_id=schedule_id, action=definition.action, spec_json=orjson.dumps(definition.spec).decode(),
            policy=definition.policy,
            create_ms=ctx.now_ms, update_ms=ctx.now_ms, paused=definition.paused, note=definition.note,
            limited_actions=definition.limited_actions, remaining_actions=definition.remaining_actions,
            memo=check_memo(ctx, attributes.get("memo")),
            search_attributes=check_memo(ctx, attributes.get("search_attributes"), "search_attributes"),
            processed_ms=ctx.now_ms, request_id=cmd.request_id or "")
    except InvalidArgument as exc:
        ctx.out.reject(cmd, RejectionType.INVALID_ARGUMENT, str(exc))
        return
    _recorded(ctx, ScheduleIntent.CREATED, schedule, schedule=_definition_json(schedule), identity=v["identity"],
              conflict_token=schedule.conflict_token)
    _apply_patch(ctx, schedule, patch)
    actions.run_pass_and_store(ctx, schedule)


def update(cmd: Record, ctx: ProcessingContext) -> None:
    """Replace the definition (Temporal's UpdateSchedule); counters and history stay."""
    schedule = _found(cmd, ctx)
    if schedule is None:
        return
    token = cmd.value["conflict_token"]
    if token >= 0 and token != schedule.conflict_token:
        ctx.out.reject(cmd, RejectionType.INVALID_STATE,
                       f"mismatched conflict token: the schedule was updated since (token {schedule.conflict_token}, "
                       f"request gave {token})")
        return
    try:
        definition = parse_definition(ctx, cmd.value["schedule"])
        attributes = _attributes(cmd)
        search_attributes = check_memo(ctx, attributes.get("search_attributes"), "search_attributes")
    except InvalidArgument as exc:
        ctx.out.reject(cmd, RejectionType.INVALID_ARGUMENT, str(exc))
        return
    schedule.action, schedule.spec, schedule.policy = definition.action, definition.spec, definition.policy
    schedule.paused, schedule.note = definition.paused, definition.note
    schedule.limited_actions, schedule.remaining_actions = definition.limited_actions, definition.remaining_actions
    if "search_attributes" in attributes:
        schedule.search_attributes = search_attributes
    schedule.update_ms = ctx.now_ms
    schedule.conflict_token += 1
    # Times before the update are not taken under the new spec (Temporal skips them).
    schedule.processed_ms = max(schedule.processed_ms, ctx.now_ms)
    _recorded(ctx, ScheduleIntent.UPDATED, schedule, schedule=_definition_json(schedule),
              identity=cmd.value["identity"], conflict_token=schedule.conflict_token)
    actions.run_pass_and_store(ctx, schedule)


def _parse_patch(text: str | None) -> dict[str, Any]:
    patch = json_object(text, "patch")
    trigger = patch.get("trigger_immediately")
    if trigger is not None:
        if not isinstance(trigger, dict):
            raise InvalidArgument("trigger_immediately must be a JSON object")
        overlap_policy(trigger.get("overlap_policy"))
    backfills = patch.get("backfill_request") or []
    if not isinstance(backfills, list):
        raise InvalidArgument("backfill_request must be a list")
    for b in backfills:
        if not isinstance(b, dict) or not isinstance(b.get("start_time_ms"), int) \
                or not isinstance(b.get("end_time_ms"), int):
            raise InvalidArgument("a backfill needs start_time_ms and end_time_ms (epoch milliseconds)")
        if b["end_time_ms"] < b["start_time_ms"]:
            raise InvalidArgument(f"a backfill's end_time_ms ({b['end_time_ms']}) is before its "
                                  f"start_time_ms ({b['start_time_ms']})")
        overlap_policy(b.get("overlap_policy"))
    for key in ("pause", "unpause"):
        if key in patch and not isinstance(patch[key], str):
            raise InvalidArgument(f"{key} must be a note (a string)")
    return patch


def _apply_patch(ctx: ProcessingContext, schedule: StoredSchedule, patch: dict[str, Any]) -> None:
    """Pause / unpause (notes), a trigger and backfills (manual starts, buffered)."""
    if "pause" in patch and not schedule.paused:
        schedule.paused, schedule.note = True, patch["pause"] or "Paused via API"
        _recorded(ctx, ScheduleIntent.PAUSED, schedule, reason=schedule.note)
    elif "pause" in patch:
        schedule.note = patch["pause"] or schedule.note
    if "unpause" in patch and schedule.paused:
        schedule.paused, schedule.note = False, patch["unpause"] or "Unpaused via API"
        schedule.processed_ms = max(schedule.processed_ms, ctx.now_ms)  # unpausing does not catch up
        _recorded(ctx, ScheduleIntent.UNPAUSED, schedule, reason=schedule.note)
    trigger = patch.get("trigger_immediately")
    if trigger is not None:
        at = trigger.get("scheduled_time_ms") or ctx.now_ms
        actions.buffer_manual(schedule, at, _own_overlap(trigger))
    for b in patch.get("backfill_request") or []:
        # Start inclusive: Temporal subtracts a millisecond; end inclusive.
        schedule.backfills.append({"after_ms": b["start_time_ms"] - 1, "end_ms": b["end_time_ms"],
                                   "overlap": _own_overlap(b)})
    if trigger is not None or patch.get("backfill_request"):
        _recorded(ctx, ScheduleIntent.PATCHED, schedule, patch=orjson.dumps(patch).decode())


def _own_overlap(request: dict[str, Any]) -> int:
    """A manual start's own overlap policy; 0 (unspecified) resolves to the schedule's when
    the start is processed, so changing the schedule's policy applies to it (8.6)."""
    return int(overlap_policy(request.get("overlap_policy"), default=ScheduleOverlapPolicy.UNSPECIFIED))


def patch(cmd: Record, ctx: ProcessingContext) -> None:
    schedule = _found(cmd, ctx)
    if schedule is None:
        return
    try:
        parsed = _parse_patch(cmd.value["patch"])
    except InvalidArgument as exc:
        ctx.out.reject(cmd, RejectionType.INVALID_ARGUMENT, str(exc))
        return
    if not parsed:
        ctx.out.reject(cmd, RejectionType.INVALID_ARGUMENT, "patch is empty: nothing to do")
        return
    _apply_patch(ctx, schedule, parsed)
    ctx.out.reply(SC, ScheduleIntent.PATCHED, -1, {"schedule_id": schedule.schedule_id})
    actions.run_pass_and_store(ctx, schedule)


def delete(cmd: Record, ctx: ProcessingContext) -> None:
    """Delete the schedule; the workflows it started keep running (as in Temporal)."""
    schedule = _found(cmd, ctx)
    if schedule is None:
        return
    ctx.schedules.delete(schedule)
    _recorded(ctx, ScheduleIntent.DELETED, schedule, identity=cmd.value["identity"])


def describe_schedule(cmd: Record, ctx: ProcessingContext) -> None:
    schedule = _found(cmd, ctx)
    if schedule is not None:
        ctx.out.reply(SC, ScheduleIntent.DESCRIBED, -1, {
            "schedule_id": schedule.schedule_id, "conflict_token": schedule.conflict_token,
            "attributes": orjson.dumps(describe(ctx, schedule)).decode()})


def list_schedules(cmd: Record, ctx: ProcessingContext) -> None:
    """One page of this partition's schedules, after the id the command names."""
    page = ctx.schedules.committed(LIST_PAGE + 1, after_id=cmd.value["schedule_id"])
    ctx.out.reply(SC, ScheduleIntent.LISTED, -1, {"schedule_id": cmd.value["schedule_id"], "attributes": orjson.dumps({
        "schedules": [summary(ctx, s) for s in page[:LIST_PAGE]], "more": len(page) > LIST_PAGE}).decode()})


def trigger(cmd: Record, ctx: ProcessingContext) -> None:
    """The due-date checker's wake-up: stale unless the schedule still waits for this time."""
    schedule = ctx.schedules.get(cmd.value["schedule_id"])
    if schedule is None or schedule.due_ms != cmd.value["due_ms"]:
        ctx.out.reject(cmd, RejectionType.INVALID_STATE,
                       f"schedule {cmd.value['schedule_id']!r} is not due at {cmd.value['due_ms']}")
        return
    actions.run_pass(ctx, schedule)
    if actions.is_retired(ctx, schedule):
        ctx.schedules.delete(schedule)
        _recorded(ctx, ScheduleIntent.DELETED, schedule, reason="no more actions for 7 days")
    else:
        ctx.schedules.put(schedule)


def _schedule_of_workflow(cmd: Record, ctx: ProcessingContext) -> StoredSchedule | None:
    """The schedule a workflow's partition reports to (gone if deleted: nothing to do)."""
    schedule = ctx.schedules.get(cmd.value["schedule_id"])
    if schedule is None:
        ctx.out.reject(cmd, RejectionType.NOT_FOUND,
                       f"schedule {cmd.value['schedule_id']!r} is gone; its workflow's news is dropped")
    return schedule


def workflow_start_failed(cmd: Record, ctx: ProcessingContext) -> None:
    """The start was refused (its id is taken, say): the action is over, the next may go."""
    schedule = _schedule_of_workflow(cmd, ctx)
    if schedule is None:
        return
    _workflow_gone(schedule, cmd.value["workflow_id"], "START_FAILED")
    _recorded(ctx, ScheduleIntent.WORKFLOW_RECORDED, schedule, workflow_id=cmd.value["workflow_id"],
              reason=cmd.value["reason"], attributes=orjson.dumps({"status": "START_FAILED"}).decode())
    actions.run_pass_and_store(ctx, schedule)


def workflow_closed(cmd: Record, ctx: ProcessingContext) -> None:
    """A started workflow's chain ended: remember its result or failure (for the next
    start), pause on failure if asked, and let buffered starts go."""
    schedule = _schedule_of_workflow(cmd, ctx)
    if schedule is None:
        return
    v = cmd.value
    closed = orjson.loads(v["attributes"]) if v["attributes"] else {}
    status = closed.get("status", "")
    tracked = _workflow_gone(schedule, v["workflow_id"], status)
    if tracked:
        if status == "COMPLETED":
            schedule.last_completion_result, schedule.last_failure = closed.get("result"), None
        elif closed.get("failure") is not None:
            schedule.last_failure = closed["failure"]
        if status in ("FAILED", "TIMED_OUT") and schedule.policy["pause_on_failure"] and not schedule.paused:
            schedule.paused = True
            message = (closed.get("failure") or {}).get("message", "")
            schedule.note = (f"paused due to workflow failure: {v['workflow_id']}: {message}" if status == "FAILED"
                             else f"paused due to workflow timeout: {v['workflow_id']}")
            _recorded(ctx, ScheduleIntent.PAUSED, schedule, reason=schedule.note)
    _recorded(ctx, ScheduleIntent.WORKFLOW_RECORDED, schedule, workflow_id=v["workflow_id"], run_id=v["run_id"],
              attributes=orjson.dumps({"status": status}).decode())
    actions.run_pass_and_store(ctx, schedule)


def _workflow_gone(schedule: StoredSchedule, workflow_id: str, status: str) -> bool:
    """Forget a workflow as running; True if it was tracked (not an ALLOW_ALL start)."""
    before = len(schedule.running)
    schedule.running = [r for r in schedule.running if r["workflow_id"] != workflow_id]
    recent = schedule.find_recent(workflow_id)
    if recent is not None:
        recent.status = status
    return len(schedule.running) < before


SCHEDULE_PROCESSORS: dict[str, Processor] = {
    ScheduleIntent.CREATE: create,
    ScheduleIntent.UPDATE: update,
    ScheduleIntent.PATCH: patch,
    ScheduleIntent.DELETE: delete,
    ScheduleIntent.DESCRIBE: describe_schedule,
    ScheduleIntent.LIST: list_schedules,
    ScheduleIntent.TRIGGER: trigger,
    ScheduleIntent.WORKFLOW_START_FAILED: workflow_start_failed,
    ScheduleIntent.WORKFLOW_CLOSED: workflow_closed,
}
