"""Workflow tasks as a worker receives them: one record, or several pages to put together.

The engine writes a task whose history does not fit one record as pages ``0..pages-1``,
one after the other on the task's partition in one transaction (docs/workflow-protocol.md,
"Workflow tasks"). Another engine partition may write to the same task partition at the
same time, so pages of different tasks can interleave: pages are grouped by the task
they belong to (run, scheduled event, attempt), never by arrival order alone.

A worker that joined the group in the middle of a task's pages (it got the partition
from a worker that stopped mid-task) never sees the first pages; such a task is
dropped at once (its first page came before, from the same producer), and the engine's
task timeout schedules it again with its whole history.

A task may carry only the history after the run's previous completed task
(`first_event_id` > 1); the worker fills in the rest from its cache or GET_HISTORY
(`workflow_activation`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson

from streamproc.protocol.records import Record

__all__ = ["WorkflowTask", "TaskPageAssembler", "one_record_task"]


@dataclasses.dataclass(frozen=True, slots=True)
class WorkflowTask:
    """One workflow task with its history: events `first_event_id` up to its
    WORKFLOW_TASK_SCHEDULED (from 1: the whole history; from later: the events from the
    run's previous completed task on, which a worker that has the run cached continues)."""

    key: int
    workflow_id: str
    run_id: str
    workflow_type: str
    task_queue: str
    attempt: int
    scheduled_event_id: int
    history: list[dict[str, Any]]
    first_event_id: int = 1
    #: Updates the task carries to the code (update_id, name, input, identity).
    updates: tuple[dict[str, Any], ...] = ()
    #: Local activity markers the engine keeps journaled for the run's open task
    #: (MarkerRecorded-shaped, without ids): its calls take them instead of running again.
    journaled_markers: tuple[dict[str, Any], ...] = ()

    @property
    def is_whole(self) -> bool:
        return self.first_event_id == 1

    @classmethod
    def from_record(cls, record: Record, history: list[dict[str, Any]]) -> WorkflowTask:
        v = record.value
        attributes = orjson.loads(v["attributes"]) if v.get("attributes") else {}
        return cls(key=record.key, workflow_id=v["workflow_id"], run_id=v["run_id"],
                   workflow_type=v["workflow_type"], task_queue=v["task_queue"], attempt=v["attempt"],
                   scheduled_event_id=v["scheduled_event_id"], history=history,
                   first_event_id=v.get("first_event_id") or 1, updates=tuple(attributes.get("updates", ())),
                   journaled_markers=tuple(attributes.get("journaled_markers", ())))


#: What identifies the pages of one task.
_TaskId = tuple[str, int, int]


@dataclasses.dataclass(slots=True)
class _Pending:
    first: Record
    pages: int
    #: page number -> events of that page
    received: dict[int, list[dict[str, Any]]]
    #: (partition, offset) of every page record, so they can be committed once answered.
    positions: list[tuple[int, int]]


class TaskPageAssembler:
    """Collects pages until a task is whole. Bounded: at most `max_pending` tasks wait."""

    def __init__(self, max_pending: int = 1000) -> None:
        self.max_pending = max_pending
        self._pending: dict[_TaskId, _Pending] = {}
        #: Tasks given up on (incomplete when the buffer overflowed or a page repeated).
        self.dropped = 0

    def add(self, record: Record, partition: int = -1, offset: int = -1) -> WorkflowTask | None:
        """Add one WORKFLOW_TASK record; returns the task once its last page is in.

        Raises ValueError when the record is not a well-formed page (bad JSON history,
        page outside ``0..pages-1``): the caller logs it and moves on.
        """
        v = record.value
        pages, page = v.get("pages", 1) or 1, v.get("page", 0)
        events = _page_events(record, pages, page)
        if pages == 1:
            return WorkflowTask.from_record(record, events)
        task_id = (v["run_id"], v["scheduled_event_id"], v["attempt"])
        pending = self._pending.get(task_id)
        if page == 0:
            if pending is not None:  # the same task written again: start over with this copy
                self.dropped += 1
            pending = self._pending[task_id] = _Pending(record, pages, {}, [])
            self._evict_oldest()
        elif pending is None or page in pending.received or pending.pages != pages:
            # One producer writes a task's pages in order, so page 0 came before this one,
            # before the offset this worker started at: the task cannot be completed here.
            self.dropped += 1
            self._pending.pop(task_id, None)
            return None
        pending.received[page] = events
        pending.positions.append((partition, offset))
        if len(pending.received) < pending.pages:
            return None
        del self._pending[task_id]
        history = [event for n in range(pages) for event in pending.received[n]]
        return WorkflowTask.from_record(pending.first, history)

    def pending_offsets(self, partition: int) -> list[int]:
        """Offsets on `partition` of pages whose task is not whole yet (not committable)."""
        return [o for p in self._pending.values() for part, o in p.positions if part == partition]

    def forget_partitions(self, partitions: set[int]) -> None:
        """Drop tasks with pages on partitions this worker no longer owns."""
        for task_id in [t for t, p in self._pending.items()
                        if any(part in partitions for part, _ in p.positions)]:
            del self._pending[task_id]

    @property
    def pending(self) -> int:
        return len(self._pending)

    def _evict_oldest(self) -> None:
        while len(self._pending) > self.max_pending:
            del self._pending[next(iter(self._pending))]
            self.dropped += 1


def one_record_task(record: Record) -> WorkflowTask:
    """A task that must be whole in one record (the engine hands back only such a task),
    read without an assembler; ValueError if it is a page."""
    pages = record.value.get("pages", 1) or 1
    if pages != 1:
        raise ValueError(f"a handed-back task is one record, got {pages} pages")
    return WorkflowTask.from_record(record, _page_events(record, pages, record.value.get("page", 0)))


def _page_events(record: Record, pages: int, page: int) -> list[dict[str, Any]]:
    if not 0 <= page < pages:
        raise ValueError(f"page must be in [0, {pages}), got {page}")
    events = orjson.loads(record.value["history"]) if record.value.get("history") else []
    if not isinstance(events, list):
        raise ValueError(f"history must be a JSON list, got {type(events).__name__}")
    return events
