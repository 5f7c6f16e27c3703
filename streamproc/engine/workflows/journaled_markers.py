"""Local activity markers journaled while their workflow task is out (JOURNAL_MARKERS).

A worker that checkpoints local activities sends each outcome's marker before the next
call runs and waits only until the broker has it: every step is on the log (the commands
topic) before the next one starts, as a journaled step of Restate is, without ending the
workflow task and waiting for the next (a transaction and a hop per step). The engine
keeps the markers with the run, writes no event for them, and they become MarkerRecorded
events when the task completes: right after its WORKFLOW_TASK_COMPLETED, in the order
they came, before the answer's own commands (the worker journals only while the task has
issued nothing but markers, so that is the order the code issued them in) and in place of
the answer's markers of the same sequence numbers. The history is Temporal's.

A task that times out or fails keeps them: the next attempt carries them to its worker
(`journaled_markers` in the task's attributes), whose code takes their outcomes without
calling the functions again. A run that ends otherwise (terminated, timed out) drops them,
as Temporal drops the markers of a task that never completed.
"""

from __future__ import annotations

from typing import Any

import orjson

from streamproc.engine.processing import ProcessingContext
from streamproc.protocol.workflow_commands import WorkflowCommandType
from streamproc.semantics import InvalidArgument
from streamproc.semantics.workflow_events import EventType
from streamproc.state.workflow_run import WorkflowRun

__all__ = ["MAX_JOURNALED_MARKERS", "check_journal", "merge_into_answer", "carried"]

#: Markers a run keeps journaled at most: a worker answers its task (which writes them)
#: long before this (`workflow/local_activity_task.py`); a client that does not is refused.
MAX_JOURNALED_MARKERS = 1_000

_RECORD_MARKER = WorkflowCommandType.RECORD_MARKER
_MARKER_RECORDED = EventType.MARKER_RECORDED.name
Validated = tuple[WorkflowCommandType, dict[str, Any]]


def marker_seq(attributes: dict[str, Any]) -> str | None:
    details = attributes.get("details")
    seq = details.get("seq") if isinstance(details, dict) else None
    return None if seq is None else str(seq)


def check_journal(ctx: ProcessingContext, run: WorkflowRun, commands: Any) -> list[dict[str, Any]]:
    """The new markers of a JOURNAL_MARKERS command (those journaled before are skipped: a
    copy sent again); raises InvalidArgument for anything that is not one, or past the limits."""
    if not isinstance(commands, list) or not commands or not all(isinstance(c, dict) for c in commands):
        raise InvalidArgument("commands must be a non-empty JSON list of RECORD_MARKER commands")
    known = {marker_seq(m) for m in run.journaled_markers}
    new: list[dict[str, Any]] = []
    size = sum(len(orjson.dumps(m.get("details"))) for m in run.journaled_markers)
    for command in commands:
        if WorkflowCommandType.parse(command.get("type")) is not _RECORD_MARKER:
            raise InvalidArgument(f"only RECORD_MARKER commands can be journaled, got {command.get('type')!r}")
        if not command.get("marker_name") or not isinstance(command["marker_name"], str):
            raise InvalidArgument("MarkerName is not set on command.")
        attributes = {"marker_name": command["marker_name"], "details": command.get("details")}
        seq = marker_seq(attributes)
        if seq is None:
            raise InvalidArgument("a journaled marker's details must name its seq")
        if seq in known:
            continue
        known.add(seq)
        size += len(orjson.dumps(attributes["details"]))
        new.append(attributes)
    if size > ctx.limits.max_payload_bytes:
        raise InvalidArgument(f"the journaled markers of the task would hold {size} bytes, more than the limit "
                              f"of {ctx.limits.max_payload_bytes}: answer the task to write them")
    if len(run.journaled_markers) + len(new) > MAX_JOURNALED_MARKERS:
        raise InvalidArgument(f"a run keeps at most {MAX_JOURNALED_MARKERS} journaled markers: answer the "
                              f"task to write them")
    return new


def merge_into_answer(run: WorkflowRun, validated: list[Validated]) -> list[Validated]:
    """The journaled markers first, then the answer's commands without its copies of them;
    the run keeps none after."""
    journaled = run.journaled_markers
    if not journaled:
        return validated
    run.journaled_markers = []
    seqs = {marker_seq(m) for m in journaled}
    return [*((_RECORD_MARKER, m) for m in journaled),
            *(v for v in validated if v[0] is not _RECORD_MARKER or marker_seq(v[1]) not in seqs)]


def carried(run: WorkflowRun) -> list[dict[str, Any]] | None:
    """What a task carries of them to its worker, shaped as the MarkerRecorded events they
    will be (without ids: they are not written yet); None: none."""
    return [{"event_type": _MARKER_RECORDED, "attributes": m} for m in run.journaled_markers] or None
