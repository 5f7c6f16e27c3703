"""What a CREATE or UPDATE says a schedule is: checked and normalised, or refused.

The command's `schedule` is JSON {action, spec, policy, state} (docs/schedules.md). The
spec is compiled here (SEMANTICS.md 8.1-8.3), so the stored schedule and DESCRIBE hold
the compiled form, as Temporal's do. Refusals use Temporal's messages where it has them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson

from streamproc.engine.processing import ProcessingContext
from streamproc.engine.validation import check_json, json_object
from streamproc.protocol.topics import check_task_queue
from streamproc.protocol.wire_values import policy_from_record, policy_to_record
from streamproc.semantics import InvalidArgument, normalize_workflow_retry_policy
from streamproc.semantics.schedule_overlap import ScheduleOverlapPolicy, normalize_catchup_window_ms
from streamproc.semantics.schedule_spec import compile_spec
from streamproc.semantics.workflow_ids import validate_workflow_id
from streamproc.semantics.workflow_timeouts import WorkflowTimeouts, normalize_workflow_timeouts
from streamproc.protocol.wire_values import duration_from_ms

#: Temporal appends "-<RFC 3339 time>" (21 characters) to the action's workflow id.
WORKFLOW_ID_SUFFIX_LENGTH = 21
_TIMEOUT_FIELDS = ("workflow_execution_timeout_ms", "workflow_run_timeout_ms", "workflow_task_timeout_ms")


@dataclasses.dataclass(frozen=True)
class ScheduleDefinition:
    action: dict[str, Any]
    spec: dict[str, Any]
    policy: dict[str, Any]
    paused: bool
    note: str
    limited_actions: bool
    remaining_actions: int


def parse_definition(ctx: ProcessingContext, text: str | None) -> ScheduleDefinition:
    """The schedule a command describes; raises `InvalidArgument` with the reason."""
    if not text:
        raise InvalidArgument("schedule is not set on request")
    doc = json_object(text, "schedule")
    state = _object(doc, "state")
    remaining = state.get("remaining_actions", 0)
    if not isinstance(remaining, int) or remaining < 0:
        raise InvalidArgument(f"remaining_actions must be a whole number >= 0, got {remaining!r}")
    return ScheduleDefinition(
        action=_action(ctx, _object(doc, "action")), spec=compile_spec(_object(doc, "spec")).to_dict(),
        policy=_policy(_object(doc, "policy")), paused=bool(state.get("paused", False)),
        note=str(state.get("note") or ""), limited_actions=bool(state.get("limited_actions", False)),
        remaining_actions=remaining)


def check_memo(ctx: ProcessingContext, memo: Any, what: str = "memo") -> dict[str, Any] | None:
    """A memo or search attributes: a JSON object within the payload limit, or None."""
    if memo is None:
        return None
    if not isinstance(memo, dict):
        raise InvalidArgument(f"{what} must be a JSON object, got {type(memo).__name__}")
    problem = check_json(orjson.dumps(memo).decode(), what, ctx.limits.max_payload_bytes)
    if problem:
        raise InvalidArgument(problem)
    return memo


def _object(doc: dict, name: str) -> dict[str, Any]:
    value = doc.get(name) or {}
    if not isinstance(value, dict):
        raise InvalidArgument(f"schedule {name} must be a JSON object, got {type(value).__name__}")
    return value


def _action(ctx: ProcessingContext, action: dict[str, Any]) -> dict[str, Any]:
    """A StartWorkflow action (the only kind Temporal has)."""
    start = action.get("start_workflow", action)
    if not isinstance(start, dict) or not start:
        raise InvalidArgument("schedule action is not set: it must start a workflow")
    base_id = start.get("workflow_id") or ""
    validate_workflow_id(base_id, max_length=ctx.limits.history.max_id_length - WORKFLOW_ID_SUFFIX_LENGTH)
    problem = (None if start.get("workflow_type") else "WorkflowType is not set on request.") \
        or check_task_queue(start.get("task_queue")) \
        or check_json(start.get("input") or "null", "input", ctx.limits.max_payload_bytes)
    if problem:
        raise InvalidArgument(problem)
    if start.get("cron_schedule"):
        raise InvalidArgument("CronSchedule is not allowed in a schedule's start workflow action")
    reuse = start.get("id_reuse_policy") or ""
    if reuse not in ("", "ALLOW_DUPLICATE"):
        raise InvalidArgument(f"a schedule's workflow id reuse policy must be ALLOW_DUPLICATE or unset, got {reuse}")
    timeouts = [start.get(f) or 0 for f in _TIMEOUT_FIELDS]
    if not all(isinstance(t, int) for t in timeouts):
        raise InvalidArgument(f"{', '.join(_TIMEOUT_FIELDS)} must be whole milliseconds")
    normalize_workflow_timeouts(WorkflowTimeouts(*(duration_from_ms(t) for t in timeouts)))
    policy = start.get("retry_policy")
    normalized = normalize_workflow_retry_policy(policy_from_record(policy)) if policy else None
    return {
        "workflow_id": base_id, "workflow_type": start["workflow_type"], "task_queue": start["task_queue"],
        "input": start.get("input"), **dict(zip(_TIMEOUT_FIELDS, timeouts)),
        "retry_policy": None if normalized is None else policy_to_record(normalized),
        "memo": check_memo(ctx, start.get("memo")),
        "search_attributes": check_memo(ctx, start.get("search_attributes"), "search_attributes"),
    }


def _policy(policy: dict[str, Any]) -> dict[str, Any]:
    return {"overlap": overlap_policy(policy.get("overlap")).name,
            "catchup_window_ms": normalize_catchup_window_ms(policy.get("catchup_window_ms")),
            "pause_on_failure": bool(policy.get("pause_on_failure", False))}


def overlap_policy(name: Any, *, default: ScheduleOverlapPolicy = ScheduleOverlapPolicy.SKIP) -> ScheduleOverlapPolicy:
    """An overlap policy by name (or number); unset or UNSPECIFIED is `default`."""
    if name in (None, "", 0, "UNSPECIFIED"):
        return default
    try:
        return ScheduleOverlapPolicy[name] if isinstance(name, str) else ScheduleOverlapPolicy(name)
    except (KeyError, ValueError):
        allowed = ", ".join(p.name for p in ScheduleOverlapPolicy if p.value)
        raise InvalidArgument(f"overlap policy must be one of {allowed}, got {name!r}") from None
