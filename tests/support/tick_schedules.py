"""Many schedules that start workflow "Tick" every second between two times, for the tests
that count what the schedules start. No worker runs "Tick": the WORKFLOW_EXECUTION_STARTED
events are what is checked, and a start's workflow id (`<schedule id>-<nominal time>`)
says which action it was."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from streamproc.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
)
from tests.support.history import EventLog

SECOND = timedelta(seconds=1)


def create_tick_schedules(client: Client, prefix: str, count: int, first: datetime, last: datetime,
                          **start_options: Any) -> None:
    """Schedules `<prefix>-000`, `<prefix>-001` ... (`count` of them), each as `create_tick_schedule`."""
    for n in range(count):
        create_tick_schedule(client, f"{prefix}-{n:03d}", first, last, **start_options)


def create_tick_schedule(client: Client, schedule_id: str, first: datetime, last: datetime,
                         **start_options: Any) -> None:
    """A schedule starting "Tick" every second from `first` to `last` (both included), runs
    allowed to overlap; `start_options`: more options of the workflow start."""
    client.create_schedule(schedule_id, Schedule(
        action=ScheduleActionStartWorkflow("Tick", id=schedule_id, task_queue="ticks", **start_options),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=SECOND)], start_at=first, end_at=last),
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.ALLOW_ALL)))


def tick_workflow_ids(prefix: str, count: int, first: datetime, last: datetime,
                      created_s: dict[str, int] | None = None) -> set[str]:
    """The workflow id of every action the schedules of `create_tick_schedules` take; with
    `created_s` (schedule id -> the second the engine created it in), only the times after
    that second (a schedule's first action is the first time strictly after its creation,
    counted in whole seconds as Temporal does)."""
    seconds = int((last - first) / SECOND)
    return {f"{prefix}-{n:03d}-{(first + s * SECOND).strftime('%Y-%m-%dT%H:%M:%SZ')}"
            for n in range(count) for s in range(seconds + 1)
            if created_s is None or first.timestamp() + s > created_s[f"{prefix}-{n:03d}"]}


def started_workflow_ids(log: EventLog) -> list[str]:
    """The workflow id of each WORKFLOW_EXECUTION_STARTED read so far (twice for a run started twice)."""
    return [r.value["workflow_id"] for r in log.events("WORKFLOW", "WORKFLOW_EXECUTION_STARTED")]
