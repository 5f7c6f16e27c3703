"""The engine's metric families, in Zeebe's and Temporal's words where they have some.

Fed once per committed batch (`committed`, with the batch's `BatchTally`), never per
command: the counters are plain dicts of totals that a collector turns into counter
families when Prometheus scrapes, and the histograms get one observation per batch (or
per due command). Partitions owned and RocksDB size are read at scrape time from what
the engine owns (`watch`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from streamproc.metrics.batch_tally import BatchTally

BATCH_SIZE_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)
LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
DUE_LAG_BUCKETS_S = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

#: What the engine owns right now: partition -> its RocksDB directory.
OwnedPartitions = Callable[[], dict[int, Path]]


class EngineMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        #: Totals since start, read by the collector (a dict copy is atomic under the GIL).
        self.commands: dict[tuple[int, str, str], int] = {}
        self.rejections: dict[tuple[int, str, str, str], int] = {}
        self._owned: OwnedPartitions = dict
        self.batch_size = Histogram(
            "streamproc_batch_size", "Commands processed per committed transaction (from the log and due).",
            buckets=BATCH_SIZE_BUCKETS, registry=self.registry)
        self.commit_latency = Histogram(
            "streamproc_transaction_commit_latency_seconds",
            "From handing a batch's transaction to the commit thread to its commit (offsets sent, "
            "records flushed, transaction committed).", buckets=LATENCY_BUCKETS_S, registry=self.registry)
        self.due_date_lag = Histogram(
            "streamproc_due_date_lag_seconds",
            "How late a due command (timer, timeout, retry backoff, schedule action) was processed "
            "after its due time, by its value type and intent.",
            ["value_type", "intent"], buckets=DUE_LAG_BUCKETS_S, registry=self.registry)
        self._due_lag_children: dict[tuple[str, str], object] = {}
        self.registry.register(_EngineCollector(self))

    def watch(self, owned: OwnedPartitions) -> None:
        """Where the partitions owned and their RocksDB sizes are read at scrape time."""
        self._owned = owned

    def committed(self, tally: BatchTally, commit_seconds: float) -> None:
        """A batch's transaction committed: add what it did."""
        totals = self.commands
        for key, n in tally.commands.items():
            totals[key] = totals.get(key, 0) + n
        totals = self.rejections
        for key, n in tally.rejections.items():
            totals[key] = totals.get(key, 0) + n
        for key, lags in tally.due_lags_ms.items():
            child = self._due_lag_children.get(key)
            if child is None:
                child = self._due_lag_children[key] = self.due_date_lag.labels(*key)
            for lag in lags:
                child.observe(max(lag, 0) / 1000)
        size = tally.size
        if size:  # a commit of echo offsets only processed nothing
            self.batch_size.observe(size)
            self.commit_latency.observe(commit_seconds)


class _EngineCollector:
    """The counters from the engine's totals, and the gauges read at scrape time."""

    def __init__(self, metrics: EngineMetrics) -> None:
        self._metrics = metrics

    def collect(self):
        m = self._metrics
        processed = CounterMetricFamily(
            "streamproc_commands_processed", "Commands processed and committed, by partition, value type and intent.",
            labels=["partition", "value_type", "intent"])
        for (partition, value_type, intent), n in dict(m.commands).items():
            processed.add_metric([str(partition), str(value_type), str(intent)], n)
        rejected = CounterMetricFamily(
            "streamproc_commands_rejected",
            "Commands rejected, by partition, value type, intent and rejection type (the reason's kind).",
            labels=["partition", "value_type", "intent", "rejection_type"])
        for (partition, value_type, intent, rejection_type), n in dict(m.rejections).items():
            rejected.add_metric([str(partition), str(value_type), str(intent), str(rejection_type)], n)
        owned = m._owned()
        partitions = GaugeMetricFamily("streamproc_partitions_owned", "Partitions this engine process owns.",
                                       value=len(owned))
        size = GaugeMetricFamily("streamproc_rocksdb_size_bytes",
                                 "Bytes on disk of each owned partition's RocksDB (SST files, WAL, manifest).",
                                 labels=["partition"])
        for partition, path in sorted(owned.items()):
            size.add_metric([str(partition)], directory_bytes(path))
        return [processed, rejected, partitions, size]


def directory_bytes(path: Path) -> int:
    """Bytes of the files in `path` (RocksDB keeps its files in one flat directory); a file
    that a compaction deletes while it is being counted is skipped."""
    total = 0
    try:
        entries = list(os.scandir(path))
    except OSError:  # closed and removed meanwhile
        return 0
    for entry in entries:
        try:
            if entry.is_file(follow_symlinks=False):
                total += entry.stat(follow_symlinks=False).st_size
        except OSError:
            continue
    return total
