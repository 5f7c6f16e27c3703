"""Taking a schedule's actions (SEMANTICS.md 8.6-8.9).

Each pass, run when the schedule's due time comes or something changed it (a patch, an
update, a workflow of it closing):

1. automatic action times since the last pass, up to now, go into the buffer, unless
   paused (the time is skipped), out of remaining actions, or older than the catch-up
   window (counted as missed);
2. backfills add their manual starts, at most half the buffer at a time;
3. the buffer is processed by the overlap policies: starts go out as START commands to
   the workflows' partitions, running workflows may be cancelled or terminated;
4. the next wake-up is armed: the next action time, or now while work is left.

A start's workflow id is the action's id plus the nominal time (`<id>-2026-05-04T11:00:00Z`),
so a start sent twice is refused by its id reuse policy: REJECT_DUPLICATE for automatic
starts, ALLOW_DUPLICATE for manual ones, as Temporal sends.
"""

from __future__ import annotations

import functools
from datetime import datetime, timezone

import orjson

from streamproc.engine.processing import ProcessingContext
from streamproc.engine import run_ids
from streamproc.engine.schedules.definition import overlap_policy
from streamproc.protocol.records import ScheduleIntent, ValueType, WorkflowIntent
from streamproc.semantics.schedule_overlap import (
    BUFFER_CAPACITY,
    POLICY_BY_NUMBER,
    BufferedStart,
    ScheduleOverlapPolicy,
    outside_catchup_window,
    process_buffer,
)
from streamproc.semantics.schedule_spec import (
    Beyond,
    CompiledSpec,
    action_times,
    action_times_and_beyond,
    next_action_time_after,
)
from streamproc.state.schedules import RecentAction, StoredSchedule

#: Action times one pass looks at, so a long outage under a short period is caught up in
#: bounded steps (the next pass is armed at once).
MAX_TIMES_PER_PASS = 1000
#: A schedule with nothing left to do is deleted this long after its last event (8.10).
RETIRE_AFTER_MS = 7 * 86_400_000
_ALLOW_ALL = ScheduleOverlapPolicy.ALLOW_ALL
CANCEL_REASON = "cancelled by schedule overlap policy"
TERMINATE_REASON = "terminated by schedule overlap policy"
#: Enum members looked up once (a member's lookup on its class is a Python call per use).
_SCHEDULE, _WORKFLOW = ValueType.SCHEDULE, ValueType.WORKFLOW
_START, _ACTION_STARTED = WorkflowIntent.START, ScheduleIntent.ACTION_STARTED


#: Compiled specs by their stored JSON text: schedules sharing a spec (every hour, say)
#: share its compiled search structures, and a pass does not rebuild them. Bounded:
#: cleared when full.
_COMPILED: dict[str, CompiledSpec] = {}
COMPILED_SPECS_KEPT = 4096


def compiled_spec(schedule: StoredSchedule) -> CompiledSpec:
    """The schedule's compiled spec, built once per distinct spec (see `_COMPILED`)."""
    key = schedule.spec_json
    spec = _COMPILED.get(key)
    if spec is None:
        if len(_COMPILED) >= COMPILED_SPECS_KEPT:
            _COMPILED.clear()
        spec = _COMPILED[key] = CompiledSpec.from_dict(orjson.loads(key))
    return spec


def seed_of(ctx: ProcessingContext, schedule: StoredSchedule) -> str:
    """The jitter seed: Temporal's `<namespace id>-<schedule id>`, with our namespace."""
    return f"{ctx.namespace}-{schedule.schedule_id}"


def scheduler_identity(ctx: ProcessingContext, schedule: StoredSchedule) -> str:
    return f"streamproc-scheduler-{ctx.namespace}-{schedule.schedule_id}"


def scheduled_workflow_id(base: str, nominal_ms: int) -> str:
    """Temporal's id for a scheduled run: the base id, '-', the nominal time to the second."""
    return f"{base}-{_id_time(nominal_ms // 1000)}"


#: Action times formatted recently: the schedules due in the same second (a burst, or
#: every schedule on the hour) share one formatting instead of one each.
TIMES_FORMATTED_KEPT = 1024


@functools.lru_cache(maxsize=TIMES_FORMATTED_KEPT)
def _id_time(second: int) -> str:
    return datetime.fromtimestamp(second, tz=timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')


def run_pass(ctx: ProcessingContext, schedule: StoredSchedule) -> None:
    """Take what is due now (see the module's steps); the caller stores the schedule."""
    now = ctx.now_ms
    spec = compiled_spec(schedule)
    seed = seed_of(ctx, schedule)
    skipped = {"missed_catchup_window": 0, "buffer_dropped": 0, "overlap_skipped": 0}
    more, beyond = _buffer_automatic(ctx, schedule, spec, seed, now, skipped)
    more = _buffer_backfills(schedule, spec, seed, skipped) or more
    _process_buffer(ctx, schedule, skipped)
    if any(skipped.values()):
        ctx.out.event(ValueType.SCHEDULE, ScheduleIntent.ACTIONS_SKIPPED, -1, {
            "schedule_id": schedule.schedule_id, "attributes": orjson.dumps(skipped).decode()}, reply=False)
    arm_next(ctx, schedule, spec, now if more else None, beyond)


def run_pass_and_store(ctx: ProcessingContext, schedule: StoredSchedule) -> None:
    run_pass(ctx, schedule)
    ctx.schedules.put(schedule)


def arm_next(ctx: ProcessingContext, schedule: StoredSchedule, spec: CompiledSpec | None = None,
             at_ms: int | None = None, beyond: Beyond | None = None) -> None:
    """Wake the schedule at `at_ms`, else at its next automatic action time (none when
    paused or out of remaining actions; `beyond`, where the pass's search stopped, may
    be it), else, when it has nothing left to do, when it is to be deleted."""
    if at_ms is None and schedule.backfills:
        at_ms = ctx.now_ms
    if at_ms is None and not schedule.paused and not (schedule.limited_actions and schedule.remaining_actions <= 0):
        spec = spec or compiled_spec(schedule)
        upcoming = next_action_time_after(spec, seed_of(ctx, schedule), schedule.processed_ms, beyond)
        at_ms = None if upcoming is None else upcoming.actual_ms
    if at_ms is None:
        at_ms = retire_at_ms(schedule)
    ctx.schedules.arm(schedule, at_ms)


def retire_at_ms(schedule: StoredSchedule) -> int | None:
    """When a schedule that will take no more actions is deleted: 7 days after its last
    event (create, update or action), as Temporal does; None while paused or busy."""
    if schedule.paused or schedule.buffer or schedule.backfills or schedule.running:
        return None
    return max([schedule.update_ms, *(a.start_ms for a in schedule.recent)]) + RETIRE_AFTER_MS


def is_retired(ctx: ProcessingContext, schedule: StoredSchedule) -> bool:
    """After a pass: armed only for its deletion, and that time has come."""
    retire_at = retire_at_ms(schedule)
    return retire_at is not None and schedule.due_ms == retire_at and ctx.now_ms >= retire_at


def _buffer_automatic(ctx: ProcessingContext, schedule: StoredSchedule, spec: CompiledSpec, seed: str,
                      now: int, skipped: dict[str, int]) -> tuple[bool, Beyond | None]:
    """Step 1; True when the pass stopped at its cap with more times due, and where the
    search stopped (the next action after `now`, for `arm_next`)."""
    if schedule.paused:
        schedule.processed_ms = now  # a paused schedule skips the time; unpausing does not catch up
        return False, None
    times, beyond = action_times_and_beyond(spec, seed, schedule.processed_ms, limit=MAX_TIMES_PER_PASS,
                                            until_ms=now)
    window = schedule.policy["catchup_window_ms"]
    # Automatic starts already waiting count against the remaining actions (counted once
    # here, not per time: this runs on every TRIGGER).
    room = schedule.remaining_actions - sum(1 for s in schedule.buffer if not s["manual"])
    for t in times:
        if schedule.limited_actions and room <= 0:
            break
        if outside_catchup_window(now, t.actual_ms, window):
            schedule.missed_catchup_window += 1
            skipped["missed_catchup_window"] += 1
            continue
        if _add(schedule, {"nominal_ms": t.nominal_ms, "actual_ms": t.actual_ms, "overlap": 0, "manual": False},
                BUFFER_CAPACITY, skipped):
            room -= 1
    capped = len(times) == MAX_TIMES_PER_PASS
    schedule.processed_ms = times[-1].actual_ms if capped else now
    return capped, beyond


def _buffer_backfills(schedule: StoredSchedule, spec: CompiledSpec, seed: str, skipped: dict[str, int]) -> bool:
    """Step 2; True when backfills are left for a later pass."""
    room = BUFFER_CAPACITY // 2 - len(schedule.buffer)
    while schedule.backfills and room > 0:
        backfill = schedule.backfills[0]
        times = action_times(spec, seed, backfill["after_ms"], limit=room, until_ms=backfill["end_ms"])
        for t in times:
            _add(schedule, {"nominal_ms": t.nominal_ms, "actual_ms": t.actual_ms,
                            "overlap": backfill["overlap"], "manual": True}, BUFFER_CAPACITY, skipped)
        if len(times) < room:
            schedule.backfills.pop(0)  # the range is done
        else:
            backfill["after_ms"] = times[-1].actual_ms
        room -= len(times)
    return bool(schedule.backfills)


def _add(schedule: StoredSchedule, start: dict, capacity: int, skipped: dict[str, int]) -> bool:
    """Buffer `start`; False (and counted as dropped) when the buffer is full."""
    if len(schedule.buffer) >= capacity:
        schedule.buffer_dropped += 1
        skipped["buffer_dropped"] += 1
        return False
    schedule.buffer.append(start)
    return True


def buffer_manual(schedule: StoredSchedule, at_ms: int, overlap: int) -> None:
    """A trigger: one manual start at `at_ms` (nominal = actual), ahead of nothing."""
    if len(schedule.buffer) >= BUFFER_CAPACITY:
        schedule.buffer_dropped += 1
        return
    schedule.buffer.append({"nominal_ms": at_ms, "actual_ms": at_ms, "overlap": overlap, "manual": True})


def _process_buffer(ctx: ProcessingContext, schedule: StoredSchedule, skipped: dict[str, int]) -> None:
    """Step 3."""
    if not schedule.buffer:
        return
    resolved = overlap_policy(schedule.policy["overlap"])
    outcome = process_buffer(
        [BufferedStart(s["nominal_ms"], s["actual_ms"], POLICY_BY_NUMBER[s["overlap"]], s["manual"])
         for s in schedule.buffer],
        running=bool(schedule.running), schedule_overlap=resolved)
    schedule.buffer = [{"nominal_ms": s.nominal_ms, "actual_ms": s.actual_ms, "overlap": int(s.overlap),
                        "manual": s.manual} for s in outcome.new_buffer]
    schedule.overlap_skipped += outcome.overlap_skipped
    skipped["overlap_skipped"] += outcome.overlap_skipped
    if outcome.need_terminate or outcome.need_cancel:
        _stop_running(ctx, schedule, terminate=outcome.need_terminate)
    for start in outcome.start:
        allow_all = (start.overlap or resolved) is _ALLOW_ALL  # its own policy, else the schedule's
        if not start.manual and schedule.limited_actions:
            if schedule.remaining_actions <= 0:
                continue
            schedule.remaining_actions -= 1
        start_workflow(ctx, schedule, start, tracked=not allow_all)


def start_workflow(ctx: ProcessingContext, schedule: StoredSchedule, start: BufferedStart, *, tracked: bool) -> None:
    """Send the action's START to the workflow's partition, naming the run id, so the
    schedule knows its run at once; that partition answers only WORKFLOW_START_FAILED if
    it could not start, and WORKFLOW_CLOSED when the workflow's chain ends."""
    action = schedule.action
    workflow_id = scheduled_workflow_id(action["workflow_id"], start.nominal_ms)
    run_id = run_ids.new_run_id()
    schedule.action_count += 1
    search_attributes = {**(action.get("search_attributes") or {}),
                         "TemporalScheduledStartTime": _rfc3339(start.nominal_ms),
                         "TemporalScheduledById": schedule.schedule_id}
    carried = {} if not tracked else {"last_completion_result": schedule.last_completion_result,
                                      "continued_failure": schedule.last_failure}
    ctx.out.command(_WORKFLOW, _START, -1, {
        "workflow_id": workflow_id, "workflow_type": action["workflow_type"], "task_queue": action["task_queue"],
        "input": action.get("input"),
        **{f: action.get(f) or 0 for f in ("workflow_execution_timeout_ms", "workflow_run_timeout_ms",
                                          "workflow_task_timeout_ms")},
        "retry_policy": action.get("retry_policy"),
        "id_reuse_policy": "ALLOW_DUPLICATE" if start.manual else "REJECT_DUPLICATE",
        "identity": scheduler_identity(ctx, schedule),
        "attributes": orjson.dumps({
            "schedule": {"schedule_id": schedule.schedule_id, "tracked": tracked, "run_id": run_id},
            "memo": action.get("memo"), "search_attributes": search_attributes,
            **{k: v for k, v in carried.items() if v is not None}}).decode(),
    }, request_id=f"{schedule.schedule_id}/{schedule.action_count}")
    schedule.record_action(RecentAction(start.nominal_ms, start.actual_ms, ctx.now_ms, workflow_id, run_id,
                                        manual=start.manual))
    if tracked:
        schedule.running.append({"workflow_id": workflow_id, "run_id": run_id})
    ctx.out.event(_SCHEDULE, _ACTION_STARTED, -1, {
        "schedule_id": schedule.schedule_id, "workflow_id": workflow_id, "run_id": run_id,
        "attributes": orjson.dumps({"nominal_time_ms": start.nominal_ms, "actual_time_ms": start.actual_ms,
                                    "manual": start.manual, "overlap": int(start.overlap)}).decode()},
                  reply=False)


def _stop_running(ctx: ProcessingContext, schedule: StoredSchedule, *, terminate: bool) -> None:
    intent = WorkflowIntent.TERMINATE if terminate else WorkflowIntent.REQUEST_CANCEL
    for running in schedule.running:
        ctx.out.command(ValueType.WORKFLOW, intent, -1, {
            "workflow_id": running["workflow_id"], "run_id": "",
            "reason": TERMINATE_REASON if terminate else CANCEL_REASON,
            "identity": scheduler_identity(ctx, schedule)})


@functools.lru_cache(maxsize=TIMES_FORMATTED_KEPT)
def _rfc3339(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat().replace("+00:00", "Z")
