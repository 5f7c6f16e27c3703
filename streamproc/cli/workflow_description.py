"""`workflow describe` for people, grouped as Temporal's CLI groups it: Execution Info,
Pending Workflow Task, Pending Activities, Pending Timers, Last Failure; times as UTC
with how long ago."""

from __future__ import annotations

from typing import Any

import click
import orjson

from streamproc.cli.human_time import span, timestamp


def _section(title: str, rows: list[tuple[str, Any]]) -> None:
    """`title` (none for an item of a list) and its non-empty rows, names aligned."""
    if title:
        click.echo(title)
    rows = [(name, value) for name, value in rows if value not in (None, "", [], {})]
    width = max((len(name) for name, _ in rows), default=0)
    for name, value in rows:
        text = value if isinstance(value, str) else orjson.dumps(value).decode()
        click.echo(f"  {name.ljust(width)}  {text}")


def _failure_text(failure: dict | None) -> str:
    if not failure:
        return ""
    kind = failure.get("type") or failure.get("kind") or ""
    text = f"{kind}: {failure.get('message', '')}" if kind else failure.get("message", "")
    cause = failure.get("cause")
    return f"{text} (cause: {_failure_text(cause)})" if cause else text


def echo_description(d: dict[str, Any], close_failure: dict | None = None) -> None:
    """Print DESCRIBE's answer `d`; `close_failure`: the failure a failed run closed with."""
    timeouts = d.get("workflow_timeouts_ms") or {}
    _section("Execution Info:", [
        ("WorkflowId", d.get("workflow_id")), ("RunId", d.get("run_id")), ("Type", d.get("workflow_type")),
        ("TaskQueue", d.get("task_queue")), ("Status", d.get("status")), ("Attempt", d.get("attempt")),
        ("StartTime", timestamp(d.get("start_time_ms"))), ("ExecutionTime", timestamp(d.get("execution_time_ms"))),
        ("CloseTime", timestamp(d.get("close_time_ms"))),
        ("ExecutionTimeout", span(timeouts["execution_ms"]) if timeouts.get("execution_ms") else ""),
        ("RunTimeout", span(timeouts["run_ms"]) if timeouts.get("run_ms") else ""),
        ("HistoryLength", d.get("history_length")), ("HistorySize", f"{d.get('history_size_bytes', 0)} bytes"),
        ("FirstRunId", d.get("first_execution_run_id") if d.get("first_execution_run_id") != d.get("run_id") else ""),
        ("NewRunId", d.get("new_execution_run_id")), ("Memo", d.get("memo")),
        ("SearchAttributes", d.get("search_attributes")),
    ])
    task = d.get("pending_workflow_task")
    if task:
        _section("Pending Workflow Task:", [(k, timestamp(v) if k.endswith("time_ms") else v) for k, v in task.items()])
    activities = d.get("pending_activities") or []
    click.echo(f"Pending Activities: {len(activities)}")
    for activity in activities:
        _section("", [
            ("ActivityId", activity.get("activity_id")), ("ActivityType", activity.get("activity_type")),
            ("State", activity.get("state")), ("Attempt", activity.get("attempt")),
            ("LastStartedTime", timestamp(activity.get("last_started_ms"))),
            ("LastHeartbeatTime", timestamp(activity.get("last_heartbeat_ms"))),
            ("LastFailure", _failure_text(activity.get("last_failure"))),
            ("CancelRequested", "yes" if activity.get("cancel_requested") else ""),
        ])
    timers = d.get("pending_timers") or []
    click.echo(f"Pending Timers: {len(timers)}")
    for timer in timers:
        _section("", [("TimerId", timer.get("timer_id")), ("FiresAt", timestamp(timer.get("due_ms"))),
                      ("StartedEventId", timer.get("started_event_id"))])
    last = close_failure or next((a["last_failure"] for a in reversed(activities) if a.get("last_failure")), None)
    if last:
        _section("Last Failure:", [("Failure", _failure_text(last))])
