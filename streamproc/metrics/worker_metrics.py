"""The workers' metric families, named as Temporal's SDK names them where it has a name.

One `WorkerMetrics` per process, shared by its job, activity and workflow workers (the
`task_type` label tells them apart: `job`, `activity`, `workflow`). Observations happen
once per task, next to work that costs far more (a START's round trip to the engine, a
workflow task's replay), with the labelled child looked up once per queue.
"""

from __future__ import annotations

import functools
import threading

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from streamproc.metrics.consumer_lag import STATS_INTERVAL_MS, partition_lags

log = structlog.get_logger("streamproc.worker")

SCHEDULE_TO_START_BUCKETS_S = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                               60.0, 300.0)
WORKFLOW_TASK_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class WorkerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None, *,
                 stats_interval_ms: int = STATS_INTERVAL_MS) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        #: How often librdkafka reports a task queue consumer's lag.
        self.stats_interval_ms = stats_interval_ms
        self.schedule_to_start = Histogram(
            "streamproc_schedule_to_start_latency_seconds",
            "From a task's scheduling (its attempt made startable) to its start: for jobs and activities "
            "the engine's times of both (the accepted START), for workflow tasks until the worker took it.",
            ["task_queue", "task_type"], buckets=SCHEDULE_TO_START_BUCKETS_S, registry=self.registry)
        self.workflow_task_execution = Histogram(
            "streamproc_workflow_task_execution_latency_seconds",
            "Time a workflow worker spent on a workflow task: replay or resume of the code to its next "
            "block, and its answer handed to the producer.",
            ["task_queue"], buckets=WORKFLOW_TASK_BUCKETS_S, registry=self.registry)
        self.workflow_task_ride_along = Counter(
            "streamproc_workflow_task_ride_along",
            "Workflow tasks answered with an activity's completion (ride-along), by the engine's "
            "verdict: accepted (no task went through the queue or the hand-back) or refused.",
            ["task_queue", "verdict"], registry=self.registry)
        self.workflow_task_ride_along_skipped = Counter(
            "streamproc_workflow_task_ride_along_skipped",
            "Activity completions that went without the run's next workflow task's answer, by reason "
            "(no_turn, not_cached, task_held, answer_out, ...: see worker/ride_along.py).",
            ["task_queue", "reason"], registry=self.registry)
        self.consumer_lag = Gauge(
            "streamproc_task_queue_consumer_lag",
            "Tasks on a task queue partition this worker owns that no worker started yet (last stable "
            "offset minus the group's committed offset, from librdkafka's statistics).",
            ["task_queue", "task_type", "partition"], registry=self.registry)
        self._children: dict[tuple, object] = {}
        self._lock = threading.Lock()
        #: (task_queue, task_type) -> partitions whose lag is being reported.
        self._lag_partitions: dict[tuple[str, str], set[int]] = {}

    def _child(self, family, *labels: str):
        key = (id(family), *labels)
        child = self._children.get(key)
        if child is None:
            with self._lock:
                child = self._children.setdefault(key, family.labels(*labels))
        return child

    def task_started(self, task_queue: str, task_type: str, scheduled_ms: int, started_ms: int) -> None:
        """A task of `task_queue` started `started_ms - scheduled_ms` after it was scheduled."""
        if scheduled_ms > 0:  # 0: a record from before the field existed
            self._child(self.schedule_to_start, task_queue, task_type).observe(max(started_ms - scheduled_ms, 0) / 1000)

    def workflow_task_executed(self, task_queue: str, seconds: float) -> None:
        self._child(self.workflow_task_execution, task_queue).observe(seconds)

    def workflow_task_rode_along(self, task_queue: str, accepted: bool) -> None:
        self._child(self.workflow_task_ride_along, task_queue, "accepted" if accepted else "refused").inc()

    def workflow_task_ride_along_skip(self, task_queue: str, reason: str) -> None:
        self._child(self.workflow_task_ride_along_skipped, task_queue, reason).inc()

    def consumer_config(self, task_queue: str, task_type: str, topic: str) -> dict:
        """Settings for a task queue's consumer that make librdkafka report its lag to us."""
        return {"statistics.interval.ms": self.stats_interval_ms,
                "stats_cb": functools.partial(self._on_stats, task_queue, task_type, topic)}

    def _on_stats(self, task_queue: str, task_type: str, topic: str, stats_json: str) -> None:
        """On the consumer's polling thread, every `STATS_INTERVAL_MS`."""
        try:
            lags = partition_lags(stats_json, topic)
        except (ValueError, TypeError, AttributeError) as exc:  # never let a report break the poll
            log.warning("consumer_stats_unreadable", topic=topic, error=str(exc))
            return
        queue = (task_queue, task_type)
        with self._lock:
            for gone in self._lag_partitions.get(queue, set()) - set(lags):  # revoked: not ours to report
                try:
                    self.consumer_lag.remove(task_queue, task_type, str(gone))
                except KeyError:
                    pass
            self._lag_partitions[queue] = set(lags)
            for partition, lag in lags.items():
                self.consumer_lag.labels(task_queue, task_type, str(partition)).set(lag)
