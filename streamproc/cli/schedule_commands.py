"""`streamproc schedule create|describe|list|pause|unpause|toggle|trigger|backfill|update|delete`.

Options are named as Temporal's CLI names them: ``--schedule-id/-s``; the spec as
``--calendar`` (the JSON calendar form, e.g. ``{"dayOfWeek":"Fri","hour":"17"}``),
``--cron``, ``--interval`` (``45m``, ``6h/5h``: every 6 hours at 5 past the epoch-aligned
period), ``--start-time``, ``--end-time``, ``--jitter``, ``--time-zone``; the action as
``--workflow-id/-w``, ``--type``, ``--task-queue/-t``, ``--input/-i``; the policies as
``--overlap-policy``, ``--catchup-window``, ``--pause-on-failure``. Tables by default,
one JSON document with ``--output json``.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any

import click
import orjson

from streamproc.cli.connect import connected_client
from streamproc.cli.human_time import timestamp
from streamproc.cli.output import OUTPUT, echo_json, echo_table
from streamproc.cli.params import DURATION, json_value
from streamproc.cli.workflow_commands import _guarded
from streamproc.client.client import Client
from streamproc.client.schedule_types import (
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleBackfill,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
    spec_wire,
)
from streamproc.client.schedules import ScheduleUpdate

_SCHEDULE_ID = click.option("--schedule-id", "-s", required=True, help="Schedule id.")
_OVERLAP = click.option("--overlap-policy", type=click.Choice([p.name for p in ScheduleOverlapPolicy if p.value]),
                        default=None, help="What to do when a workflow of the schedule is still running.")
#: The JSON calendar form's fields, in Temporal CLI's camelCase and in snake_case.
_CALENDAR_KEYS = {"second": "second", "minute": "minute", "hour": "hour", "dayOfMonth": "day_of_month",
                  "day_of_month": "day_of_month", "month": "month", "year": "year", "dayOfWeek": "day_of_week",
                  "day_of_week": "day_of_week", "comment": "comment"}


def _time(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        at = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter(f"not an RFC 3339 time like 2026-05-04T11:00:00Z: {text!r}") from None
    if at.tzinfo is None:
        raise click.BadParameter(f"give a time zone (Z or +02:00): {text!r}")
    return at


def _calendar(text: str) -> dict[str, Any]:
    value = json_value(text)
    if not isinstance(value, dict) or any(k not in _CALENDAR_KEYS for k in value):
        raise click.BadParameter(f"a calendar is a JSON object with fields {', '.join(sorted(set(_CALENDAR_KEYS.values())))}:"
                                 f" {text}")
    return {_CALENDAR_KEYS[k]: str(v) for k, v in value.items()}


def _definition_options(func):
    for option in reversed([
        click.option("--calendar", "calendars", multiple=True, help="Calendar spec as JSON; repeatable."),
        click.option("--cron", "crons", multiple=True, help="Cron string (5-7 fields, @every, CRON_TZ=); repeatable."),
        click.option("--interval", "intervals", multiple=True, help="Interval like 45m or 6h/5h; repeatable."),
        click.option("--start-time", default=None, help="No actions before this time (RFC 3339)."),
        click.option("--end-time", default=None, help="No actions after this time (RFC 3339)."),
        click.option("--jitter", type=DURATION, default=None, help="Delay each action by up to this long (e.g. 5m)."),
        click.option("--time-zone", default=None, help="IANA time zone of calendars and crons (default UTC)."),
        click.option("--workflow-id", "-w", required=True, help="Base workflow id (each run adds its time)."),
        click.option("--type", "workflow_type", required=True, help="Workflow type name."),
        click.option("--task-queue", "-t", required=True),
        click.option("--input", "-i", "inputs", multiple=True, help="JSON value of an argument; repeatable."),
        click.option("--execution-timeout", type=DURATION, default=None, help="Workflow execution timeout (e.g. 1h)."),
        click.option("--run-timeout", type=DURATION, default=None, help="Workflow run timeout."),
        _OVERLAP,
        click.option("--catchup-window", type=DURATION, default=None, help="Take actions missed by at most this long (default 365d)."),
        click.option("--pause-on-failure", is_flag=True, help="Pause when a started workflow fails or times out."),
        click.option("--paused", is_flag=True, help="Create (or leave) the schedule paused."),
        click.option("--notes", default=None, help="Notes on the schedule's state."),
        click.option("--remaining-actions", type=click.IntRange(0), default=None,
                     help="Take only this many more automatic actions."),
    ]):
        func = option(func)
    return func


def _build(o: dict[str, Any]) -> Schedule:
    """The schedule the options describe. Its spec is given in the wire form the engine
    compiles, so calendar strings and intervals reach it as typed (`--interval 6h/5h`
    is the cron string `@every 6h/5h`)."""
    spec = spec_wire(ScheduleSpec(start_at=_time(o["start_time"]), end_at=_time(o["end_time"]),
                                  jitter=o["jitter"] or None,
                                  time_zone_name=o["time_zone"]))
    spec["calendar"] = [_calendar(c) for c in o["calendars"]]
    spec["cron_string"] = list(o["crons"]) + [f"@every {i}" for i in o["intervals"]]
    action = ScheduleActionStartWorkflow(
        o["workflow_type"], args=[json_value(t) for t in o["inputs"]], id=o["workflow_id"],
        task_queue=o["task_queue"],
        execution_timeout=o["execution_timeout"] or None, run_timeout=o["run_timeout"] or None)
    policy = SchedulePolicy(
        overlap=ScheduleOverlapPolicy[o["overlap_policy"]] if o["overlap_policy"] else ScheduleOverlapPolicy.SKIP,
        catchup_window=o["catchup_window"] or timedelta(days=365),
        pause_on_failure=o["pause_on_failure"])
    state = ScheduleState(note=o["notes"], paused=o["paused"], limited_actions=o["remaining_actions"] is not None,
                          remaining_actions=o["remaining_actions"] or 0)
    return Schedule(action, spec, policy, state)


def _change(schedule_id: str, call, done: str) -> None:
    """Run `call(client)`; one line says what was done (or, on error, what went wrong)."""
    with connected_client(identity="streamproc-cli") as client:
        _guarded(lambda: call(client))
    click.echo(f"schedule {schedule_id} {done}")


@click.group()
def schedule() -> None:
    """Create, inspect, pause, trigger, backfill, update and delete schedules."""


@schedule.command("create")
@_SCHEDULE_ID
@_definition_options
def schedule_create(schedule_id: str, **o: Any) -> None:
    """Create a schedule that starts a workflow at the times of its spec."""
    built = _build(o)
    _change(schedule_id, lambda client: client.create_schedule(schedule_id, built), "created")


@schedule.command("update")
@_SCHEDULE_ID
@_definition_options
def schedule_update(schedule_id: str, **o: Any) -> None:
    """Replace the schedule's spec, action, policies and state (counts and history stay)."""
    built = _build(o)
    _change(schedule_id, lambda client: client.get_schedule_handle(schedule_id).update(
        lambda _: ScheduleUpdate(built)), "updated")


@schedule.command("describe")
@_SCHEDULE_ID
@OUTPUT
def schedule_describe(schedule_id: str, output: str) -> None:
    """The schedule's spec (compiled), policies, state, counts, recent and next actions."""
    with connected_client() as client:
        raw = _guarded(lambda: client.get_schedule_handle(schedule_id).describe_json())
    if output != "table":
        echo_json(raw, output)
        return
    info, definition = raw["info"], raw["schedule"]
    state = definition["state"]
    rows = [("ScheduleId", schedule_id),
            ("WorkflowType", definition["action"]["start_workflow"]["workflow_type"]),
            ("Paused", state["paused"]), ("Notes", state["note"]),
            ("RemainingActions", state["remaining_actions"] if state["limited_actions"] else "unlimited"),
            ("OverlapPolicy", definition["policy"]["overlap"]),
            ("Spec", orjson.dumps(definition["spec"]).decode()),
            ("Actions", info["action_count"]), ("MissedCatchupWindow", info["missed_catchup_window"]),
            ("SkippedOverlap", info["overlap_skipped"]), ("BufferDropped", info["buffer_dropped"]),
            ("Running", ", ".join(r["workflow_id"] for r in info["running_workflows"])),
            ("RecentActions", ", ".join(a["workflow_id"] for a in info["recent_actions"])),
            ("NextActionTimes", ", ".join(timestamp(t) for t in info["future_action_times_ms"][:3]))]
    echo_table(rows, ("Field", "Value"))


@schedule.command("list")
@OUTPUT
def schedule_list(output: str) -> None:
    """Every schedule: its workflow type, whether paused, its next action time."""
    with connected_client() as client:
        entries = _guarded(lambda: list(client.list_schedules()))
    if output != "table":
        echo_json([{"schedule_id": e.id, "workflow_type": e.workflow_type, "paused": e.paused, "note": e.note,
                     "next_action_times": [t.isoformat() for t in e.next_action_times],
                     "recent_actions": [dataclasses.asdict(a) for a in e.recent_actions]} for e in entries], output)
        return
    echo_table([(e.id, e.workflow_type, e.paused, e.next_action_times[0].isoformat() if e.next_action_times else "")
            for e in entries], ("ScheduleId", "WorkflowType", "Paused", "NextActionTime"))


def _toggle(schedule_id: str, pause: bool, reason: str | None) -> None:
    def call(client: Client) -> None:
        handle = client.get_schedule_handle(schedule_id)
        handle.pause(note=reason) if pause else handle.unpause(note=reason)
    _change(schedule_id, call, "paused" if pause else "unpaused")


_REASON = click.option("--reason", default=None, help="Note why.")


@schedule.command("pause")
@_SCHEDULE_ID
@_REASON
def schedule_pause(schedule_id: str, reason: str | None) -> None:
    """Stop automatic actions until unpaused (manual triggers still run)."""
    _toggle(schedule_id, True, reason)


@schedule.command("unpause")
@_SCHEDULE_ID
@_REASON
def schedule_unpause(schedule_id: str, reason: str | None) -> None:
    """Resume automatic actions from now (missed ones are not taken)."""
    _toggle(schedule_id, False, reason)


@schedule.command("toggle")
@_SCHEDULE_ID
@click.option("--pause/--unpause", required=True, help="Pause or unpause.")
@_REASON
def schedule_toggle(schedule_id: str, pause: bool, reason: str | None) -> None:
    """Pause or unpause (Temporal's `schedule toggle`)."""
    _toggle(schedule_id, pause, reason)


@schedule.command("trigger")
@_SCHEDULE_ID
@_OVERLAP
def schedule_trigger(schedule_id: str, overlap_policy: str | None) -> None:
    """Take the action now, even when paused."""
    overlap = ScheduleOverlapPolicy[overlap_policy] if overlap_policy else None
    _change(schedule_id, lambda client: client.get_schedule_handle(schedule_id).trigger(overlap=overlap), "triggered")


@schedule.command("backfill")
@_SCHEDULE_ID
@click.option("--start-time", required=True, help="From this time (RFC 3339, inclusive).")
@click.option("--end-time", required=True, help="To this time (RFC 3339, inclusive).")
@_OVERLAP
def schedule_backfill(schedule_id: str, start_time: str, end_time: str, overlap_policy: str | None) -> None:
    """Take the actions the spec has in a range of time, now."""
    backfill = ScheduleBackfill(_time(start_time), _time(end_time),
                                ScheduleOverlapPolicy[overlap_policy] if overlap_policy else None)
    _change(schedule_id, lambda client: client.get_schedule_handle(schedule_id).backfill(backfill),
            f"backfill from {start_time} to {end_time} requested")


@schedule.command("delete")
@_SCHEDULE_ID
def schedule_delete(schedule_id: str) -> None:
    """Delete the schedule (workflows it started keep running)."""
    _change(schedule_id, lambda client: client.get_schedule_handle(schedule_id).delete(), "deleted")
