"""Local activity markers journaled while their workflow task is out (JOURNAL_MARKERS).

A worker that checkpoints local activities sends each outcome's marker before the next
call runs and waits only until the broker has it: every step is on the log (the commands
topic) before the next one starts, as a journaled step of Restate is, without ending the
workflow task and waiting for the next (a transaction and a hop per step). The engine
keeps the markers with the run and writes no event for them. The task's answer carries
every marker of the task, journaled or not, and is what history records (Temporal's
history: the markers after its WORKFLOW_TASK_COMPLETED); the journal is then forgotten.

What the journal is for is a task that does not complete. One that times out keeps it,
and the next attempt carries it to its worker (`journaled_markers` in the task's
attributes), whose code takes the outcome of each call of the same sequence number and
activity type without running the function again (and answers with those markers), up to
the third attempt: an attempt after the first never reports a failure, so a journal its
code fails on would otherwise be carried for ever. Only an attempt that sees what the
journaled one saw gets it: a task that failed (its code may change before the next
attempt), or whose next attempt is shown new events or updates, drops it, and so does a
run that ends otherwise; their steps run again, at least once as in Temporal.

A journal names how many markers the task journaled before it (`journaled_before` in its
attributes); one that does not match what the run kept (a journal before it was refused
or lost) is refused, so what is kept is always the task's first markers, without a gap,
and one that follows some must come from the worker whose markers are kept. A journal
that follows none starts the kept markers over: its worker runs the task from its start
(a task delivered again from the queue after its first worker died carries no journal, so
its steps run again, at least once as in Temporal, and are journaled again).
"""

from __future__ import annotations

from typing import Any

import orjson

from streamproc.engine.processing import ProcessingContext
from streamproc.protocol.workflow_commands import WorkflowCommandType
from streamproc.semantics import InvalidArgument
from streamproc.semantics.workflow_events import EventType
from streamproc.state.workflow_run import WorkflowRun

__all__ = ["MAX_JOURNALED_MARKERS", "MAX_ATTEMPT_CARRIED_TO", "check_journal", "forget", "carried"]

#: Markers a run keeps journaled at most: a worker answers its task (which writes them)
#: long before this (`workflow/local_activity_task.py`); a client that does not is refused.
MAX_JOURNALED_MARKERS = 1_000

_RECORD_MARKER = WorkflowCommandType.RECORD_MARKER
_MARKER_RECORDED = EventType.MARKER_RECORDED.name


def marker_seq(attributes: dict[str, Any]) -> str | None:
    """The sequence number a marker's details name (what a journal is deduplicated by)."""
    details = attributes.get("details")
    seq = details.get("seq") if isinstance(details, dict) else None
    return None if seq is None else str(seq)


class JournalGap(Exception):
    """The journal does not follow what the run kept: a journal before it was refused or lost."""


def check_journal(ctx: ProcessingContext, run: WorkflowRun, commands: Any, journaled_before: Any,
                  identity: str) -> list[dict[str, Any]]:
    """The markers the run keeps after a JOURNAL_MARKERS command (a copy of a marker kept
    already is skipped); raises InvalidArgument for anything that is not a marker, or past
    the limits, and JournalGap when `journaled_before` is not what the run kept."""
    if not isinstance(commands, list) or not commands or not all(isinstance(c, dict) for c in commands):
        raise InvalidArgument("commands must be a non-empty JSON list of RECORD_MARKER commands")
    if not isinstance(journaled_before, int) or isinstance(journaled_before, bool) or journaled_before < 0:
        raise InvalidArgument("attributes must name journaled_before: how many markers the task journaled "
                              "before this journal")
    # A worker that starts the task over (it came to it again from the queue after the
    # worker before died) journals from nothing: its markers take the place of those kept.
    kept = [] if journaled_before == 0 else list(run.journaled_markers)
    if journaled_before != len(kept):
        raise JournalGap(f"the journal follows {journaled_before} markers but the run kept "
                         f"{len(kept)} for the task: a journal before it was refused or lost")
    if kept and identity != run.journaled_by:
        # Two executions of one attempt (the task delivered again while its worker ran on):
        # what is kept must come from one of them.
        raise JournalGap(f"the journaled markers of the task are {run.journaled_by!r}'s, not {identity!r}'s")
    known = {marker_seq(m) for m in kept}
    size = sum(len(orjson.dumps(m.get("details"))) for m in kept)
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
        kept.append(attributes)
    if size > ctx.limits.max_payload_bytes:
        raise InvalidArgument(f"the journaled markers of the task would hold {size} bytes, more than the limit "
                              f"of {ctx.limits.max_payload_bytes}: answer the task to write them")
    if len(kept) > MAX_JOURNALED_MARKERS:
        raise InvalidArgument(f"a run keeps at most {MAX_JOURNALED_MARKERS} journaled markers: answer the "
                              f"task to write them")
    return kept


#: The last attempt a journal is carried to: one that also times out (its code may fail on
#: what was journaled, and an attempt after the first never reports its failure) leaves the
#: next attempts to run those steps again.
MAX_ATTEMPT_CARRIED_TO = 3


def forget(run: WorkflowRun) -> None:
    """The task's answer carries its markers, or its next attempt must run them again."""
    if run.journaled_markers:
        run.journaled_markers = []
        run.journaled_by = ""


def carried(run: WorkflowRun) -> list[dict[str, Any]] | None:
    """What a task carries of them to its worker, shaped as the MarkerRecorded events they
    will be (without ids: they are not written yet); None: none."""
    return [{"event_type": _MARKER_RECORDED, "attributes": m} for m in run.journaled_markers] or None
