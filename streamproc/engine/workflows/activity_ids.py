"""An activity's answer addressed by workflow id and activity id instead of its key.

Asynchronous completion (``client.get_async_activity_handle(workflow_id=..., run_id=...,
activity_id=...)``) sends COMPLETE, FAIL, HEARTBEAT or REPORT_CANCELED without the
activity's key and attempt, to the partition of the workflow id: the partition of the run
and of every activity it scheduled. Here the command is resolved to the current attempt
of the run's open activity with that id, then processed as a worker's command for it (so
the same checks apply: the attempt must have started). As in Temporal, an answer by id
is not tied to an attempt; one by task token is, and carries the key itself.

The activity processors know nothing of workflows: this wraps them (`engine/partition.py`).
"""

from __future__ import annotations

import dataclasses

from streamproc.engine.processing import ProcessingContext, Processor
from streamproc.protocol.records import Record, RejectionType

__all__ = ["addressed_by_ids"]


def addressed_by_ids(processor: Processor) -> Processor:
    """`processor`, also taking commands that name a workflow and an activity id (key -1)."""

    def process(cmd: Record, ctx: ProcessingContext) -> None:
        if cmd.key >= 0 or not cmd.value["workflow_id"]:
            processor(cmd, ctx)
            return
        resolved = _resolve(cmd, ctx)
        if resolved is not None:
            processor(resolved, ctx)

    process.__doc__ = processor.__doc__
    return process


def _resolve(cmd: Record, ctx: ProcessingContext) -> Record | None:
    """`cmd` with the key and current attempt of the activity it names, or None after rejecting it."""
    v = cmd.value
    workflow_id, run_id, activity_id = v["workflow_id"], v["run_id"], v["activity_id"]
    found = ctx.workflows.find(workflow_id, run_id)
    where = f"WorkflowId {workflow_id!r}, RunId {run_id or (found[1].run_id if found else '')!r}"
    if found is None:
        ctx.out.reject(cmd, RejectionType.NOT_FOUND, f"workflow execution not found: {where}")
        return None
    run = found[1]
    if not run.is_open:
        ctx.out.reject(cmd, RejectionType.NOT_FOUND,
                       f"workflow execution already completed: {where}, status {run.status.name}")
        return None
    key = next((a.key for a in run.pending_activities().values() if a.activity_id == activity_id), None)
    activity = ctx.activities.get(key) if key is not None else None
    if activity is None:  # never scheduled, or closed already (completed, timed out ...)
        ctx.out.reject(cmd, RejectionType.NOT_FOUND,
                       f"no open activity with ActivityId {activity_id!r} in workflow execution {where}")
        return None
    return dataclasses.replace(cmd, key=key, value={**v, "attempt": activity[1].attempt}, encoded=None)
