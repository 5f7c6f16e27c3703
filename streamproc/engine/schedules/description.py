"""What DESCRIBE and LIST say of a schedule (SEMANTICS.md 8.10): the definition with its
policies' defaults filled and the spec compiled, and the info Temporal shows (counts,
recent actions, running workflows, the next action times)."""

from __future__ import annotations

import dataclasses
from typing import Any

from streamproc.engine.processing import ProcessingContext
from streamproc.engine.schedules.actions import compiled_spec, seed_of
from streamproc.semantics.schedule_spec import action_times
from streamproc.state.schedules import StoredSchedule

#: Next action times a description lists (Temporal: 10), and a list entry (Temporal: 5).
FUTURE_ACTIONS = 10
LIST_ACTIONS = 5


def future_action_times(ctx: ProcessingContext, schedule: StoredSchedule, count: int) -> list[int]:
    """The next `count` (jittered) action times, fewer when limited or the spec ends. A
    paused schedule lists them too (as Temporal's server does: checked on 1.32)."""
    if schedule.limited_actions:
        count = min(count, schedule.remaining_actions)
    if count <= 0:
        return []
    # A paused schedule is not woken, so its last pass may be long ago: list from now.
    after = max(schedule.processed_ms, ctx.now_ms) if schedule.paused else schedule.processed_ms
    times = action_times(compiled_spec(schedule), seed_of(ctx, schedule), after, limit=count)
    return [t.actual_ms for t in times]


def _definition(schedule: StoredSchedule) -> dict[str, Any]:
    return {"action": {"start_workflow": schedule.action}, "spec": schedule.spec, "policy": schedule.policy,
            "state": {"paused": schedule.paused, "note": schedule.note,
                      "limited_actions": schedule.limited_actions,
                      "remaining_actions": schedule.remaining_actions}}


def _recent(schedule: StoredSchedule, count: int) -> list[dict[str, Any]]:
    return [dataclasses.asdict(a) for a in schedule.recent[-count:]]


def describe(ctx: ProcessingContext, schedule: StoredSchedule) -> dict[str, Any]:
    return {
        "schedule_id": schedule.schedule_id, "schedule": _definition(schedule),
        "memo": schedule.memo, "search_attributes": schedule.search_attributes,
        "conflict_token": schedule.conflict_token,
        "info": {
            "action_count": schedule.action_count, "missed_catchup_window": schedule.missed_catchup_window,
            "overlap_skipped": schedule.overlap_skipped, "buffer_dropped": schedule.buffer_dropped,
            "buffer_size": len(schedule.buffer), "running_workflows": list(schedule.running),
            "recent_actions": _recent(schedule, len(schedule.recent)),
            "future_action_times_ms": future_action_times(ctx, schedule, FUTURE_ACTIONS),
            "create_time_ms": schedule.create_ms, "update_time_ms": schedule.update_ms,
        },
    }


def summary(ctx: ProcessingContext, schedule: StoredSchedule) -> dict[str, Any]:
    """A LIST entry: Temporal's list memo (5 future times, 5 recent actions)."""
    return {
        "schedule_id": schedule.schedule_id, "memo": schedule.memo,
        "search_attributes": schedule.search_attributes,
        "info": {"workflow_type": schedule.action["workflow_type"], "paused": schedule.paused,
                 "note": schedule.note, "spec": schedule.spec,
                 "recent_actions": _recent(schedule, LIST_ACTIONS),
                 "future_action_times_ms": future_action_times(ctx, schedule, LIST_ACTIONS)},
    }
