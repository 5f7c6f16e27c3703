"""Consumer lag of a task queue, from librdkafka's own statistics.

Why statistics (`statistics.interval.ms` + `stats_cb`) rather than asking the broker:
librdkafka already knows, for each partition the consumer owns, the last stable offset
(the end a read_committed consumer can reach: a transaction's commit marker is not a
task) and the group's committed offset, and computes `consumer_lag` from them. Reading
it costs one JSON parse per interval on the worker's polling thread, no request to the
broker and no call on the consumer from another thread; measuring it ourselves would
need `committed()` (a broker round trip) and watermarks for every partition. The lag is
that of the tasks not yet started: workers commit a task's offset once its START was
answered. Each worker reports the partitions it owns, so summing over workers gives the
queue's lag; with no worker running nothing reports it (alert on schedule-to-start
latency, or on the series being absent).
"""

from __future__ import annotations

import orjson

#: How often librdkafka reports (ms): fresher than Prometheus' usual 15 s scrape.
STATS_INTERVAL_MS = 5000


def partition_lags(stats_json: str | bytes, topic: str) -> dict[int, int]:
    """Partition -> lag of `topic`'s partitions this consumer owns and has a committed
    offset for (librdkafka reports -1 for the others: nothing known, nothing said)."""
    stats = orjson.loads(stats_json)
    partitions = stats.get("topics", {}).get(topic, {}).get("partitions", {})
    lags = {}
    for pid, p in partitions.items():
        partition = int(pid)
        lag = p.get("consumer_lag", -1)
        if partition >= 0 and lag >= 0:  # -1 is librdkafka's internal "unassigned" partition
            lags[partition] = lag
    return lags
