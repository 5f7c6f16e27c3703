"""The ActivityTaskRecord values activity processors write: events, task records, durations."""

from __future__ import annotations

from typing import Any

import orjson

from streamproc.semantics import ActivityState
from streamproc.state.activities import ActivityMeta
from streamproc.protocol.wire_values import policy_to_record, timeouts_to_record, to_ms

__all__ = ["event_value", "task_value"]

def event_value(meta: ActivityMeta, state: ActivityState, **extra: Any) -> dict[str, Any]:
    """What every activity event carries: identity, timeouts and policy as recorded, attempt."""
    value = {
        "activity_id": meta.activity_id, "activity_type": meta.activity_type,
        "task_queue": meta.task_queue, "input": meta.input,
        **timeouts_to_record(state.timeouts), "retry_policy": policy_to_record(state.retry_policy),
        "attempt": state.attempt, "identity": meta.identity,
        "scheduled_event_id": meta.scheduled_event_id,
        "latest_cancel_requested_event_id": meta.latest_cancel_requested_event_id,
        "scheduled_time_ms": to_ms(state.scheduled_time),
        "first_scheduled_time_ms": to_ms(state.first_scheduled_time),
        "started_time_ms": to_ms(state.started_time),
        "cancel_requested": state.cancel_requested,
    }
    owner = meta.workflow
    if owner is not None and owner.workflow_id:  # who scheduled it: activity.info().workflow_id ...
        value.update(workflow_id=owner.workflow_id, run_id=owner.run_id, workflow_type=owner.workflow_type)
    value.update(extra)
    return value


def task_value(meta: ActivityMeta, state: ActivityState) -> dict[str, Any]:
    """The record a worker receives for an attempt, with the details of the last heartbeat."""
    details = state.last_heartbeat_details
    return event_value(meta, state, heartbeat_details=None if details is None else orjson.dumps(details).decode())
