"""The commands a workflow task completes with, shared by the engine and the SDK.

A command travels as a plain dict with a ``type`` (docs/workflow-protocol.md). Each type
has one row here: the history event the engine appends for it, the cause a workflow task
fails with when its attributes are bad (Temporal's WorkflowTaskFailedCause), whether it
closes the run, and the attributes that identify its event on replay. The engine checks
and applies each type through its own table (`engine/workflows/commands.py`); the SDK
matches recorded events against the code's commands with the same rows
(`workflow/commands.py`). A new command is a member here, a row, and one check and one
apply function in the engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from streamproc.semantics.workflow_events import EventType


class WorkflowCommandType(StrEnum):
    """Temporal's CommandType names, without ``COMMAND_TYPE_``; the value is the wire string."""

    SCHEDULE_ACTIVITY_TASK = "SCHEDULE_ACTIVITY_TASK"
    REQUEST_CANCEL_ACTIVITY_TASK = "REQUEST_CANCEL_ACTIVITY_TASK"
    START_TIMER = "START_TIMER"
    CANCEL_TIMER = "CANCEL_TIMER"
    RECORD_MARKER = "RECORD_MARKER"
    COMPLETE_WORKFLOW_EXECUTION = "COMPLETE_WORKFLOW_EXECUTION"
    FAIL_WORKFLOW_EXECUTION = "FAIL_WORKFLOW_EXECUTION"
    CANCEL_WORKFLOW_EXECUTION = "CANCEL_WORKFLOW_EXECUTION"
    CONTINUE_AS_NEW_WORKFLOW_EXECUTION = "CONTINUE_AS_NEW_WORKFLOW_EXECUTION"
    START_CHILD_WORKFLOW_EXECUTION = "START_CHILD_WORKFLOW_EXECUTION"
    SIGNAL_EXTERNAL_WORKFLOW_EXECUTION = "SIGNAL_EXTERNAL_WORKFLOW_EXECUTION"
    REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION = "REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION"
    # Temporal sends an update's outcome as protocol messages; here each is a command, so
    # that it takes its place among the task's other commands.
    ACCEPT_UPDATE = "ACCEPT_UPDATE"
    COMPLETE_UPDATE = "COMPLETE_UPDATE"
    #: Writes no event (a rejected update leaves no history, as in Temporal).
    REJECT_UPDATE = "REJECT_UPDATE"

    @classmethod
    def parse(cls, value: object) -> WorkflowCommandType | None:
        """The member a wire ``type`` names, or None for anything else."""
        # A dict lookup, not the enum's call (its lookup machinery, and an exception for a miss).
        return _BY_WIRE_NAME.get(value) if isinstance(value, str) else None

    @property
    def spec(self) -> CommandSpec:
        return COMMAND_SPECS[self]

    @property
    def closes_run(self) -> bool:
        return self.spec.closes_run


@dataclass(frozen=True, slots=True)
class CommandSpec:
    #: The history event the engine appends for the command (None: it appends none).
    event: EventType | None
    #: The cause of WORKFLOW_TASK_FAILED when the command's attributes are bad.
    bad_attributes_cause: str
    #: Whether it must be the task's last command (the run closes).
    closes_run: bool = False
    #: (command field, event attribute) pairs that identify the command's event on replay.
    identity: tuple[tuple[str, str], ...] = ()


T = WorkflowCommandType
E = EventType
_BY_WIRE_NAME: dict[str, WorkflowCommandType] = {t.value: t for t in WorkflowCommandType}

COMMAND_SPECS: dict[WorkflowCommandType, CommandSpec] = {
    T.SCHEDULE_ACTIVITY_TASK: CommandSpec(
        E.ACTIVITY_TASK_SCHEDULED, "BAD_SCHEDULE_ACTIVITY_ATTRIBUTES",
        identity=(("activity_type", "activity_type"), ("activity_id", "activity_id"))),
    T.REQUEST_CANCEL_ACTIVITY_TASK: CommandSpec(
        E.ACTIVITY_TASK_CANCEL_REQUESTED, "BAD_REQUEST_CANCEL_ACTIVITY_ATTRIBUTES",
        identity=(("scheduled_event_id", "scheduled_event_id"),)),
    T.START_TIMER: CommandSpec(E.TIMER_STARTED, "BAD_START_TIMER_ATTRIBUTES", identity=(("timer_id", "timer_id"),)),
    T.CANCEL_TIMER: CommandSpec(E.TIMER_CANCELED, "BAD_CANCEL_TIMER_ATTRIBUTES", identity=(("timer_id", "timer_id"),)),
    T.RECORD_MARKER: CommandSpec(E.MARKER_RECORDED, "BAD_RECORD_MARKER_ATTRIBUTES",
                                 identity=(("marker_name", "marker_name"),)),
    T.COMPLETE_WORKFLOW_EXECUTION: CommandSpec(
        E.WORKFLOW_EXECUTION_COMPLETED, "BAD_COMPLETE_WORKFLOW_EXECUTION_ATTRIBUTES", closes_run=True),
    T.FAIL_WORKFLOW_EXECUTION: CommandSpec(
        E.WORKFLOW_EXECUTION_FAILED, "BAD_FAIL_WORKFLOW_EXECUTION_ATTRIBUTES", closes_run=True),
    T.CANCEL_WORKFLOW_EXECUTION: CommandSpec(
        E.WORKFLOW_EXECUTION_CANCELED, "BAD_CANCEL_WORKFLOW_EXECUTION_ATTRIBUTES", closes_run=True),
    T.CONTINUE_AS_NEW_WORKFLOW_EXECUTION: CommandSpec(
        E.WORKFLOW_EXECUTION_CONTINUED_AS_NEW, "BAD_CONTINUE_AS_NEW_ATTRIBUTES", closes_run=True),
    T.START_CHILD_WORKFLOW_EXECUTION: CommandSpec(
        E.START_CHILD_WORKFLOW_EXECUTION_INITIATED, "BAD_START_CHILD_EXECUTION_ATTRIBUTES",
        identity=(("workflow_type", "workflow_type"), ("workflow_id", "workflow_id"))),
    T.SIGNAL_EXTERNAL_WORKFLOW_EXECUTION: CommandSpec(
        E.SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED, "BAD_SIGNAL_WORKFLOW_EXECUTION_ATTRIBUTES",
        identity=(("workflow_id", "workflow_id"), ("signal_name", "signal_name"))),
    T.REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION: CommandSpec(
        E.REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED, "BAD_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_ATTRIBUTES",
        identity=(("workflow_id", "workflow_id"),)),
    T.ACCEPT_UPDATE: CommandSpec(E.WORKFLOW_EXECUTION_UPDATE_ACCEPTED, "BAD_UPDATE_WORKFLOW_EXECUTION_MESSAGE",
                                 identity=(("update_id", "protocol_instance_id"),)),
    T.COMPLETE_UPDATE: CommandSpec(E.WORKFLOW_EXECUTION_UPDATE_COMPLETED, "BAD_UPDATE_WORKFLOW_EXECUTION_MESSAGE",
                                   identity=(("update_id", "update_id"),)),
    T.REJECT_UPDATE: CommandSpec(None, "BAD_UPDATE_WORKFLOW_EXECUTION_MESSAGE"),
}

#: The commands that close the run (each must be the task's last).
CLOSE_COMMANDS = frozenset(t for t in WorkflowCommandType if t.closes_run)


def command_of_event(event_type: EventType) -> WorkflowCommandType | None:
    """The command whose event `event_type` is, if any."""
    return next((t for t, spec in COMMAND_SPECS.items() if spec.event is event_type), None)


def has_event(command_type: object) -> bool:
    """Whether the command of this wire type leaves an event in history (REJECT_UPDATE does not)."""
    kind = WorkflowCommandType.parse(command_type)
    return kind is None or kind.spec.event is not None
