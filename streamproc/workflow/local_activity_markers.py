"""The marker a local activity leaves in history, and what workflow code sees of it.

As in Temporal, a local activity writes no activity events: when it ends (or fails and
waits out a long backoff under a durable timer) the workflow task records one
``MarkerRecorded`` named ``LocalActivity`` whose details hold the run's sequence number
of the call (`seq`, what replay matches it by), the activity id and type, the attempt,
the result or the failure and, for a retry through a timer, the backoff. On replay the
result comes from the marker and the function is not called again.
"""

from __future__ import annotations

from typing import Any

from streamproc.activity import errors
from streamproc.activity.failures import exception_from_failure
from streamproc.activity.payloads import decode
from streamproc.converter import DataConverter
from streamproc.protocol.workflow_commands import WorkflowCommandType
from streamproc.semantics import RetryState
from streamproc.semantics.workflow_events import EventType

__all__ = ["LOCAL_ACTIVITY_MARKER", "marker_command", "is_local_activity_marker",
           "is_local_activity_marker_command", "marker_details", "local_activity_error"]

#: Temporal's marker name for local activities.
LOCAL_ACTIVITY_MARKER = "LocalActivity"
_MARKER_RECORDED = EventType.MARKER_RECORDED.name  # once: an enum's `.name` is a property call


def marker_command(details: dict[str, Any]) -> dict[str, Any]:
    return {"type": WorkflowCommandType.RECORD_MARKER, "marker_name": LOCAL_ACTIVITY_MARKER, "details": details}


def is_local_activity_marker(event: dict[str, Any]) -> bool:
    return (event["event_type"] == _MARKER_RECORDED
            and (event.get("attributes") or {}).get("marker_name") == LOCAL_ACTIVITY_MARKER)


def is_local_activity_marker_command(command: dict[str, Any]) -> bool:
    return command["type"] == WorkflowCommandType.RECORD_MARKER and command.get("marker_name") == LOCAL_ACTIVITY_MARKER


def marker_details(event: dict[str, Any]) -> dict[str, Any]:
    details = (event.get("attributes") or {}).get("details")
    if isinstance(details, str):  # an engine may store the details as JSON text
        details = decode(details)
    return details if isinstance(details, dict) else {}


def local_activity_error(details: dict[str, Any], converter: DataConverter) -> errors.ActivityError:
    """The ActivityError a failed local activity raises in workflow code; its cause is the
    ApplicationError (or TimeoutError) of the last attempt, as for a remote activity."""
    name = details.get("retry_state") or ""
    error = errors.ActivityError(
        "Local activity failed" if name != RetryState.TIMEOUT.name else "Local activity timed out",
        activity_id=details.get("activity_id", ""), activity_type=details.get("activity_type", ""),
        scheduled_event_id=0, started_event_id=0, identity="",
        retry_state=RetryState[name] if name in RetryState.__members__ else RetryState.UNSPECIFIED)
    error.__cause__ = exception_from_failure(details.get("failure"), converter=converter)
    return error
