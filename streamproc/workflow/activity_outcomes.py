"""An activity's close event as workflow code sees it: the result, or an ActivityError.

Temporal's SDKs wrap every way an activity ends without a result in an ActivityError
whose cause says why: the ApplicationError the activity raised, a TimeoutError naming
the timeout, or a CancelledError. Workflow code catches them the same way here.
"""

from __future__ import annotations

from typing import Any

from streamproc.activity import errors
from streamproc.activity.failures import exception_from_failure
from streamproc.converter import DataConverter
from streamproc.semantics import RetryState
from streamproc.semantics.workflow_events import EventType

__all__ = ["ACTIVITY_CLOSE_EVENTS", "activity_error", "activity_result"]

_E = EventType

_MESSAGES = {
    _E.ACTIVITY_TASK_FAILED: "Activity task failed",
    _E.ACTIVITY_TASK_TIMED_OUT: "Activity task timed out",
    _E.ACTIVITY_TASK_CANCELED: "Activity task canceled",
}

#: Events that end an activity, by their wire name.
ACTIVITY_CLOSE_EVENTS = frozenset({_E.ACTIVITY_TASK_COMPLETED.name, *(e.name for e in _MESSAGES)})


def activity_result(event: dict[str, Any], converter: DataConverter | None = None,
                    result_type: Any = None) -> Any:
    """The decoded result of an ActivityTaskCompleted event (as `result_type` if given)."""
    return (converter or DataConverter.default()).decode((event.get("attributes") or {}).get("result"),
                                                          result_type)


def activity_error(event: dict[str, Any], *, activity_id: str, activity_type: str,
                   identity: str = "", converter: DataConverter | None = None) -> errors.ActivityError:
    """The ActivityError (with its cause as ``__cause__``) for a failed, timed-out or
    canceled activity's close event."""
    kind = EventType[event["event_type"]]
    converter = converter or DataConverter.default()
    a = event.get("attributes") or {}
    cause: BaseException | None
    if kind is _E.ACTIVITY_TASK_CANCELED:
        retry_state = RetryState.CANCEL_REQUESTED
        cause = errors.CancelledError("Activity canceled", *converter.decode_details(a.get("details")))
    else:
        name = a.get("retry_state") or ""
        retry_state = RetryState[name] if name in RetryState.__members__ else RetryState.UNSPECIFIED
        cause = exception_from_failure(a.get("failure"), converter=converter)
    error = errors.ActivityError(
        _MESSAGES[kind], activity_id=activity_id, activity_type=activity_type,
        scheduled_event_id=a.get("scheduled_event_id", 0),
        started_event_id=a.get("started_event_id", 0),
        identity=a.get("identity") or identity, retry_state=retry_state)
    error.__cause__ = cause
    return error
