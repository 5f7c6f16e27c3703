"""Histories written tersely for the SEMANTICS.md 6.2 tests: events numbered 1, 2, 3 ..."""

from __future__ import annotations

from typing import Any

from streamproc.semantics import EventType, HistoryEvent

E = EventType


def history(*entries: EventType | tuple[EventType, dict[str, Any]]) -> list[HistoryEvent]:
    """Number ``entries`` 1, 2, 3 ...; an entry is a type or ``(type, attributes)``."""
    events: list[HistoryEvent] = []
    for event_id, entry in enumerate(entries, start=1):
        event_type, attrs = entry if isinstance(entry, tuple) else (entry, {})
        events.append((event_id, event_type, attrs))
    return events


def task(scheduled: int, end: EventType = E.WORKFLOW_TASK_COMPLETED, **end_attrs: Any) -> list:
    """A workflow task whose Scheduled event gets id ``scheduled``."""
    return [
        (E.WORKFLOW_TASK_SCHEDULED, {}),
        (E.WORKFLOW_TASK_STARTED, {"scheduled_event_id": scheduled}),
        (end, {"scheduled_event_id": scheduled, "started_event_id": scheduled + 1, **end_attrs}),
    ]


def sched(n: int) -> dict[str, int]:
    return {"scheduled_event_id": n}


def sched_started(n: int, started: int) -> dict[str, int]:
    return {"scheduled_event_id": n, "started_event_id": started}


def init(n: int, **more: Any) -> dict[str, Any]:
    return {"initiated_event_id": n, **more}


STARTED = (E.WORKFLOW_EXECUTION_STARTED, {"attempt": 1})
COMPLETED = E.WORKFLOW_EXECUTION_COMPLETED
SIGNALED = E.WORKFLOW_EXECUTION_SIGNALED
