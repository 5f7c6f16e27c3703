"""The command dicts of a TASK_COMPLETE, and how each is recognised in history on replay.

A command is the plain dict the wire carries (docs/workflow-protocol.md). On replay,
each recorded command event must be the one the code issues at the same position: the
same kind and the same identity (activity type and id, timer id, marker name). Inputs
and timeouts are not compared, as Temporal does not: changing an argument is a
legitimate code change, changing what is scheduled is not.
"""

from __future__ import annotations

from typing import Any

from streamproc.activity.payloads import decode
from streamproc.protocol.workflow_commands import WorkflowCommandType, command_of_event
from streamproc.semantics.workflow_events import EventType

__all__ = [
    "Command",
    "PATCH_MARKER",
    "describe",
    "describe_event",
    "mismatch",
    "is_patch_marker",
    "patch_id_of",
]

Command = dict[str, Any]

#: Marker name of workflow.patched / workflow.deprecate_patch, as Temporal's SDKs.
PATCH_MARKER = "patch"

def _identity(command_type: str) -> tuple[tuple[str, str], ...]:
    """(command field, event attribute) pairs that identify a command's event."""
    kind = WorkflowCommandType.parse(command_type)
    return kind.spec.identity if kind is not None else ()


def describe(command: Command) -> str:
    """A command as an error message names it: ``ScheduleActivityTask(activity_type='charge', ...)``."""
    kind = command["type"]
    name = "".join(word.capitalize() for word in kind.split("_"))
    fields = [(f, command.get(f)) for f, _ in _identity(kind)]
    if kind == WorkflowCommandType.RECORD_MARKER and command.get("marker_name") == PATCH_MARKER:
        fields.append(("patch_id", command["details"].get("patch_id")))
    return name + "(" + ", ".join(f"{f}={v!r}" for f, v in fields) + ")"


def describe_event(event: dict[str, Any]) -> str:
    """An event as an error message names it: ``ActivityTaskScheduled(event_id=5, activity_type='charge', ...)``."""
    kind = EventType[event["event_type"]]
    attributes = event.get("attributes") or {}
    command_type = command_of_event(kind)
    fields = [("event_id", event.get("event_id"))]
    fields += [(a, attributes.get(a)) for _, a in (command_type.spec.identity if command_type else ())]
    if is_patch_marker(event):
        fields.append(("patch_id", _patch_id(attributes)))
    return kind.event_name + "(" + ", ".join(f"{f}={v!r}" for f, v in fields) + ")"


def mismatch(command: Command, event: dict[str, Any]) -> str | None:
    """Why `event` is not the one `command` produced when it was first issued, or None."""
    expected = WorkflowCommandType(command["type"]).spec.event
    if event["event_type"] != expected.name:
        return (f"history has {describe_event(event)} where the workflow code now issues "
                f"{describe(command)}")
    attributes = event.get("attributes") or {}
    for field, attribute in _identity(command["type"]):
        if attributes.get(attribute) != command.get(field):
            return (f"{field.replace('_', ' ')} of {describe_event(event)} does not match "
                    f"{field.replace('_', ' ')} of the command the workflow code now issues, "
                    f"{describe(command)}")
    if command["type"] == WorkflowCommandType.RECORD_MARKER and command.get("marker_name") == PATCH_MARKER \
            and _patch_id(attributes) != command["details"].get("patch_id"):
        return f"history has {describe_event(event)} where the workflow code now issues {describe(command)}"
    return None


def is_patch_marker(event: dict[str, Any]) -> bool:
    return (event["event_type"] == EventType.MARKER_RECORDED.name
            and (event.get("attributes") or {}).get("marker_name") == PATCH_MARKER)


def patch_id_of(event: dict[str, Any]) -> str | None:
    return _patch_id(event.get("attributes") or {})


def _patch_id(attributes: dict[str, Any]) -> str | None:
    details = attributes.get("details")
    if isinstance(details, str):  # an engine may store the details as JSON text
        details = decode(details)
    return details.get("patch_id") if isinstance(details, dict) else None
