"""Sends a checkpointing workflow worker's local activity markers to the log while their
task is out (JOURNAL_MARKERS, `engine/workflows/journaled_markers.py`).

A marker is on the log once the broker has the command (acks from every in-sync replica):
the next local activity may run then, and a crash after it finds the marker in the next
attempt of the task. Each journal is a future that the broker's answer settles (True: on
the log), on a producer of the journal's own whose delivery reports a thread of its own
serves as they come, so the worker's loop waits on journals and running calls alike and
goes on with whichever is done first. Nothing waits for the engine: it writes the markers
when a task times out, and refuses a journal only when the task is over (the answer is
refused too, or, the answer being first, it has the markers already), past a limit or
after a journal it refused (the answer carries every marker, journaled or not).
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any

import orjson
import structlog
from confluent_kafka import KafkaException, Producer

from streamproc.kafka.client_log import ClientLog
from streamproc.kafka.config import producer_config
from streamproc.protocol import codec
from streamproc.protocol.partitioning import partition_for
from streamproc.protocol.records import Record, ValueType, WorkflowIntent
from streamproc.worker.workflow_task_pages import WorkflowTask
from streamproc.worker.workflow_worker_stats import WorkflowWorkerStats

log = structlog.get_logger("streamproc.worker")

__all__ = ["MarkerJournal"]

#: How long the reports thread waits for the next report: how soon it sees `close`.
_POLL_S = 0.1
#: The broker's answer is awaited this long at most; then the task is answered instead.
_MESSAGE_TIMEOUT_MS = 10_000


class MarkerJournal:
    def __init__(self, bootstrap: str, commands_topic: str, partitions: Callable[[], int], identity: str,
                 stats: WorkflowWorkerStats | None = None) -> None:
        self._topic = commands_topic
        self._partitions = partitions
        self._identity = identity
        self._stats = stats
        self._bootstrap = bootstrap
        self._closed = threading.Event()
        self._lock = threading.Lock()
        #: Made at the first journal (a worker that never journals holds no producer or thread).
        self._producer: Producer | None = None
        self._thread: threading.Thread | None = None

    def _started(self) -> Producer:
        with self._lock:
            if self._producer is None:
                self._producer = Producer(producer_config(self._bootstrap, **{
                    "message.timeout.ms": _MESSAGE_TIMEOUT_MS, **ClientLog("marker-journal").config()}))
                self._thread = threading.Thread(target=self._serve_reports, args=(self._producer,),
                                                name="marker-journal", daemon=True)
                self._thread.start()
            return self._producer

    def for_task(self, task: WorkflowTask) -> Callable[[list[dict[str, Any]], int], concurrent.futures.Future | None]:
        """What sends markers for `task` (its run, task and attempt), after the number it
        journaled before (the engine refuses a journal that does not follow what it kept)."""
        def send(markers: list[dict[str, Any]], journaled_before: int) -> concurrent.futures.Future | None:
            record = Record.command(ValueType.WORKFLOW, WorkflowIntent.JOURNAL_MARKERS, {
                "workflow_id": task.workflow_id, "run_id": task.run_id,
                "scheduled_event_id": task.scheduled_event_id, "attempt": task.attempt,
                "identity": self._identity, "commands": orjson.dumps(markers).decode(),
                "attributes": orjson.dumps({"journaled_before": journaled_before}).decode()}, key=task.key)
            landed: concurrent.futures.Future = concurrent.futures.Future()
            if self._closed.is_set():
                return None
            try:
                self._started().produce(self._topic, codec.encode(record), str(task.key).encode(),
                                       partition=partition_for(task.workflow_id, self._partitions()),
                                       headers=codec.AVRO_HEADERS,
                                       on_delivery=lambda err, _msg: landed.set_result(err is None))
            except (BufferError, KafkaException) as exc:
                log.warning("markers_not_journaled", workflow_id=task.workflow_id, error=str(exc))
                return None  # the task is answered with the markers instead
            if self._stats is not None:
                self._stats.journals_sent += 1
                self._stats.markers_journaled += len(markers)
            return landed
        return send

    def _serve_reports(self, producer: Producer) -> None:
        while not self._closed.is_set():
            try:
                producer.poll(_POLL_S)
            except Exception:  # noqa: BLE001 - a report's error must not stop the others
                log.exception("marker_journal_poll_failed")

    def close(self, timeout: float = 5.0) -> None:
        """Send what is queued (its tasks' answers carry the markers anyway), then stop."""
        with self._lock:
            self._closed.set()
            producer, thread = self._producer, self._thread
        if producer is not None:
            producer.flush(timeout)
        if thread is not None:
            thread.join(timeout)
