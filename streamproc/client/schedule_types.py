"""Schedules as a Temporal user writes them (the names of `temporalio.client`), and their
wire form: the JSON documents of a schedule command (docs/schedules.md).

    Schedule(action=ScheduleActionStartWorkflow(Report.run, "eu", id="report", task_queue="reports"),
             spec=ScheduleSpec(cron_expressions=["0 2 * * *"], time_zone_name="Europe/Berlin"))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from streamproc.call_arguments import NO_ARG, call_arguments
from streamproc.protocol.wire_values import ceil_ms, policy_from_record, retry_policy_record, to_datetime, to_ms
from streamproc.semantics import RetryPolicy
from streamproc.semantics.schedule_overlap import ScheduleOverlapPolicy
from streamproc.workflow.definition import workflow_type_of

__all__ = ["ScheduleRange", "ScheduleCalendarSpec", "ScheduleIntervalSpec", "ScheduleSpec",
           "ScheduleActionStartWorkflow", "SchedulePolicy", "ScheduleState", "Schedule", "ScheduleBackfill",
           "ScheduleOverlapPolicy"]



@dataclasses.dataclass(frozen=True)
class ScheduleRange:
    """Values start, start+step, ... up to end inclusive (end < start: start alone; step 0: 1)."""

    start: int
    end: int = 0
    step: int = 0


@dataclasses.dataclass(frozen=True)
class ScheduleCalendarSpec:
    """Times that match every field (wall clock in the spec's time zone). The defaults:
    midnight, every day; an empty `year` is every year, any other empty field nothing."""

    second: Sequence[ScheduleRange] = (ScheduleRange(0),)
    minute: Sequence[ScheduleRange] = (ScheduleRange(0),)
    hour: Sequence[ScheduleRange] = (ScheduleRange(0),)
    day_of_month: Sequence[ScheduleRange] = (ScheduleRange(1, 31),)
    month: Sequence[ScheduleRange] = (ScheduleRange(1, 12),)
    year: Sequence[ScheduleRange] = ()
    day_of_week: Sequence[ScheduleRange] = (ScheduleRange(0, 6),)
    comment: str | None = None


_CALENDAR_FIELDS = ("second", "minute", "hour", "day_of_month", "month", "year", "day_of_week")


@dataclasses.dataclass(frozen=True)
class ScheduleIntervalSpec:
    """Every `every`, at epoch + n*every + offset (epoch aligned, not from creation)."""

    every: timedelta
    offset: timedelta | None = None


@dataclasses.dataclass(frozen=True)
class ScheduleSpec:
    """The union of calendars, intervals and cron expressions, minus `skip`, within
    [start_at, end_at], each time delayed by up to `jitter`."""

    calendars: Sequence[ScheduleCalendarSpec] = ()
    intervals: Sequence[ScheduleIntervalSpec] = ()
    cron_expressions: Sequence[str] = ()
    skip: Sequence[ScheduleCalendarSpec] = ()
    start_at: datetime | None = None
    end_at: datetime | None = None
    jitter: timedelta | None = None
    time_zone_name: str | None = None


class ScheduleActionStartWorkflow:
    """Start `workflow` (``MyWorkflow.run``, the class or its type name) with `arg`/`args`.
    Each run's id is `id` plus the nominal time (``report-2026-05-04T11:00:00Z``)."""

    def __init__(self, workflow: str | Callable[..., Any], arg: Any = NO_ARG, *, args: Sequence[Any] = (),
                 id: str, task_queue: str, execution_timeout: timedelta | None = None,
                 run_timeout: timedelta | None = None, task_timeout: timedelta | None = None,
                 retry_policy: RetryPolicy | None = None, memo: dict[str, Any] | None = None,
                 search_attributes: dict[str, Any] | None = None) -> None:
        self.workflow = workflow_type_of(workflow)
        self.args = call_arguments(arg, args)
        self.id = id
        self.task_queue = task_queue
        self.execution_timeout = execution_timeout
        self.run_timeout = run_timeout
        self.task_timeout = task_timeout
        self.retry_policy = retry_policy
        self.memo = memo
        self.search_attributes = search_attributes

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ScheduleActionStartWorkflow) and vars(self) == vars(other)

    def __repr__(self) -> str:
        return f"ScheduleActionStartWorkflow({self.workflow!r}, id={self.id!r}, task_queue={self.task_queue!r})"


@dataclasses.dataclass(frozen=True)
class SchedulePolicy:
    overlap: ScheduleOverlapPolicy = ScheduleOverlapPolicy.SKIP
    catchup_window: timedelta = timedelta(days=365)
    pause_on_failure: bool = False


@dataclasses.dataclass(frozen=True)
class ScheduleState:
    note: str | None = None
    paused: bool = False
    limited_actions: bool = False
    remaining_actions: int = 0


@dataclasses.dataclass(frozen=True)
class Schedule:
    action: ScheduleActionStartWorkflow
    #: Or the spec's wire form (a dict, docs/schedules.md): calendar strings, say.
    spec: ScheduleSpec | dict[str, Any]
    policy: SchedulePolicy = SchedulePolicy()
    state: ScheduleState = ScheduleState()


@dataclasses.dataclass(frozen=True)
class ScheduleBackfill:
    """Take the spec's actions in [start_at, end_at] now, as manual actions."""

    start_at: datetime
    end_at: datetime
    overlap: ScheduleOverlapPolicy | None = None


# the wire form ---------------------------------------------------------------------------
def epoch_ms(at: datetime) -> int:
    if at.tzinfo is None:
        raise ValueError(f"give a time zone aware datetime, got {at!r}")
    return to_ms(at)


#: Epoch milliseconds as a UTC datetime (the wire values' own conversion).
from_epoch_ms = to_datetime


def _calendar_wire(calendar: ScheduleCalendarSpec) -> dict[str, Any]:
    out: dict[str, Any] = {name: [dataclasses.asdict(r) for r in getattr(calendar, name)]
                           for name in _CALENDAR_FIELDS}
    out["comment"] = calendar.comment or ""
    return out


def calendar_from_wire(d: dict[str, Any]) -> ScheduleCalendarSpec:
    return ScheduleCalendarSpec(**{name: tuple(ScheduleRange(**r) for r in d.get(name, ()))
                                   for name in _CALENDAR_FIELDS}, comment=d.get("comment") or None)


def spec_wire(spec: ScheduleSpec) -> dict[str, Any]:
    return {
        "structured_calendar": [_calendar_wire(c) for c in spec.calendars],
        "cron_string": list(spec.cron_expressions),
        "interval": [{"interval_ms": ceil_ms(i.every), "phase_ms": ceil_ms(i.offset or timedelta(0))}
                     for i in spec.intervals],
        "exclude_structured_calendar": [_calendar_wire(c) for c in spec.skip],
        "start_time_ms": None if spec.start_at is None else epoch_ms(spec.start_at),
        "end_time_ms": None if spec.end_at is None else epoch_ms(spec.end_at),
        "jitter_ms": ceil_ms(spec.jitter or timedelta(0)), "timezone_name": spec.time_zone_name or "",
    }


def spec_from_wire(d: dict[str, Any]) -> ScheduleSpec:
    """The compiled spec a description holds (cron strings appear as calendars)."""
    return ScheduleSpec(
        calendars=[calendar_from_wire(c) for c in d.get("structured_calendar", ())],
        intervals=[ScheduleIntervalSpec(timedelta(milliseconds=i["interval_ms"]),
                                        timedelta(milliseconds=i.get("phase_ms", 0)) or None)
                   for i in d.get("interval", ())],
        skip=[calendar_from_wire(c) for c in d.get("exclude_structured_calendar", ())],
        start_at=None if d.get("start_time_ms") is None else from_epoch_ms(d["start_time_ms"]),
        end_at=None if d.get("end_time_ms") is None else from_epoch_ms(d["end_time_ms"]),
        jitter=timedelta(milliseconds=d["jitter_ms"]) if d.get("jitter_ms") else None,
        time_zone_name=d.get("timezone_name") or None)


def schedule_wire(schedule: Schedule, encode_args: Callable[[Sequence[Any]], str]) -> dict[str, Any]:
    a = schedule.action
    if not isinstance(a, ScheduleActionStartWorkflow):
        raise TypeError(f"a schedule's action must be a ScheduleActionStartWorkflow, got {a!r}")
    return {
        "action": {"start_workflow": {
            "workflow_id": a.id, "workflow_type": a.workflow, "task_queue": a.task_queue,
            "input": encode_args(a.args),
            "workflow_execution_timeout_ms": ceil_ms(a.execution_timeout or timedelta(0)),
            "workflow_run_timeout_ms": ceil_ms(a.run_timeout or timedelta(0)),
            "workflow_task_timeout_ms": ceil_ms(a.task_timeout or timedelta(0)),
            "retry_policy": None if a.retry_policy is None else retry_policy_record(a.retry_policy),
            "memo": a.memo, "search_attributes": a.search_attributes}},
        "spec": schedule.spec if isinstance(schedule.spec, dict) else spec_wire(schedule.spec),
        "policy": {"overlap": ScheduleOverlapPolicy(schedule.policy.overlap).name,
                   "catchup_window_ms": ceil_ms(schedule.policy.catchup_window),
                   "pause_on_failure": schedule.policy.pause_on_failure},
        "state": {"note": schedule.state.note or "", "paused": schedule.state.paused,
                  "limited_actions": schedule.state.limited_actions,
                  "remaining_actions": schedule.state.remaining_actions},
    }


def schedule_from_wire(d: dict[str, Any], decode_args: Callable[[str | None], list[Any]]) -> Schedule:
    start = d["action"]["start_workflow"]
    policy_from = d.get("policy", {})

    def duration(name: str) -> timedelta | None:
        return timedelta(milliseconds=start[name]) if start.get(name) else None

    action = ScheduleActionStartWorkflow(
        start["workflow_type"], args=decode_args(start.get("input")), id=start["workflow_id"],
        task_queue=start["task_queue"], execution_timeout=duration("workflow_execution_timeout_ms"),
        run_timeout=duration("workflow_run_timeout_ms"), task_timeout=duration("workflow_task_timeout_ms"),
        retry_policy=policy_from_record(start["retry_policy"]) if start.get("retry_policy") else None,
        memo=start.get("memo"), search_attributes=start.get("search_attributes"))
    state = d.get("state", {})
    return Schedule(
        action=action, spec=spec_from_wire(d.get("spec", {})),
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy[policy_from.get("overlap", "SKIP")],
                              catchup_window=timedelta(milliseconds=policy_from.get("catchup_window_ms", 0)),
                              pause_on_failure=policy_from.get("pause_on_failure", False)),
        state=ScheduleState(note=state.get("note") or None, paused=state.get("paused", False),
                            limited_actions=state.get("limited_actions", False),
                            remaining_actions=state.get("remaining_actions", 0)))


def backfill_wire(backfill: ScheduleBackfill) -> dict[str, Any]:
    return {"start_time_ms": epoch_ms(backfill.start_at), "end_time_ms": epoch_ms(backfill.end_at),
            "overlap_policy": "" if backfill.overlap is None else ScheduleOverlapPolicy(backfill.overlap).name}
