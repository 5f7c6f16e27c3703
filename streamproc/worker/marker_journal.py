"""Sends a checkpointing workflow worker's local activity markers to the log while their
task is out (JOURNAL_MARKERS, `engine/workflows/journaled_markers.py`).

A marker is on the log once the broker has the command (acks from every in-sync replica,
the producer's default): the next local activity may run then, and a crash after it finds
the marker in the next attempt of the task. The command goes to the run's partition of the
commands topic on the same producer as the task's answer, so the engine sees the markers
before the answer. Nothing waits for the engine: it writes the markers when the task
completes, and refuses them only when the task is over (the answer is refused too) or
past a limit (the answer carries them as well).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from streamproc.client.client import Client
from streamproc.client.delivery import Delivery
from streamproc.client.errors import RequestNotSentError
from streamproc.protocol.partitioning import partition_for
from streamproc.protocol.records import Record, ValueType, WorkflowIntent
from streamproc.worker.workflow_task_pages import WorkflowTask
from streamproc.worker.workflow_worker_stats import WorkflowWorkerStats

__all__ = ["MarkerJournal"]


class MarkerJournal:
    def __init__(self, client: Client, identity: str, stats: WorkflowWorkerStats | None = None) -> None:
        self._client = client
        self._identity = identity
        self._stats = stats

    def for_task(self, task: WorkflowTask) -> Callable[[list[dict[str, Any]]], Delivery | None]:
        """What sends markers for `task` (its run, task and attempt)."""
        def send(markers: list[dict[str, Any]]) -> Delivery | None:
            record = Record.command(ValueType.WORKFLOW, WorkflowIntent.JOURNAL_MARKERS, {
                "workflow_id": task.workflow_id, "run_id": task.run_id,
                "scheduled_event_id": task.scheduled_event_id, "attempt": task.attempt,
                "identity": self._identity, "commands": orjson.dumps(markers).decode()}, key=task.key)
            client = self._client
            try:
                # Urgent: the next local activity waits for it, held sends or not.
                delivery = client.send(record, partition_for(task.workflow_id, client.partitions), urgent=True)
            except RequestNotSentError:
                return None  # the task is answered with the markers instead
            if self._stats is not None:
                self._stats.journals_sent += 1
                self._stats.markers_journaled += len(markers)
            return delivery
        return send

    def wait(self, deliveries: list[Delivery], timeout: float) -> None:
        """Until the broker answered for each of `deliveries`, at most `timeout` seconds."""
        self._client.wait_delivered(deliveries, timeout)
