"""Takeover of a partition holding many open jobs, from the changelog alone.

Engine A creates the jobs on a 1-partition namespace (no workers: they stay open) and is
SIGKILLed. Engine B (another engine id, empty state dir) starts at once. Engines use
static group membership with a 6 s session timeout, so B is given the partition only
once the broker has expired A's session: `start_to_assigned_s` includes that wait,
`restore_seconds` (B's partition_restored log line) is the rebuild from the changelog.
"""

from __future__ import annotations

import signal
import time
import uuid

from confluent_kafka import Consumer, TopicPartition

from bench.common import (Bench, EventTap, loadavg, log_time_ms, now_ms, peak_rss_mb, say, stop,
                          wait_log)
from streamproc.client import SyncClient

QUEUE = "bench-recovery"


def run(bench: Bench, quick: bool) -> dict:
    jobs = 10_000 if quick else 100_000
    run_id = uuid.uuid4().hex[:6]
    out: dict = {"jobs": jobs, "load1_at_start": loadavg()}
    a = bench.engine(f"recovery-a-{run_id}", 1)
    wait_log(a, "partitions_assigned", 90)
    tap = EventTap(bench, 1)
    client = SyncClient(bench.bootstrap, bench.namespace)
    t0 = time.monotonic()
    for i in range(jobs):
        client.create_job(QUEUE, {"i": i})
    client.flush()
    tap.wait(lambda: tap.count("CREATED") >= jobs, 120 + jobs / 100, f"{jobs} CREATED")
    out["create_seconds"] = round(time.monotonic() - t0, 3)
    out["engine_a_peak_rss_mb"] = peak_rss_mb(a)
    tap.close()

    a.send_signal(signal.SIGKILL)
    a.wait(30)
    out["changelog_end_offset"] = _end_offset(bench, bench.topics.changelog)
    probe_tap = EventTap(bench, 1, from_end=True)
    b_start = now_ms()
    b = bench.engine(f"recovery-b-{run_id}", 1, state_dir=bench.dir / f"state-b-{run_id}")
    probe = client.create_job(QUEUE, {"probe": True})
    client.flush()
    try:
        assigned = wait_log(b, "partitions_assigned", 180)[0]
        restored = wait_log(b, "partition_restored", 1)[0]
        probe_tap.wait(lambda: probe_tap.count("CREATED") >= 1, 60, "the probe's CREATED")
        (created,) = [e for e in probe_tap.decode("CREATED") if e.request_id == probe]
        assigned_ms = log_time_ms(assigned)
        out.update({
            "restore_seconds": restored["seconds"],
            "restore_records": restored["records"],
            "restore_records_per_sec": round(restored["records"] / max(restored["seconds"], 1e-3)),
            "b_start_to_partition_given_s": round((assigned_ms - restored["seconds"] * 1000 - b_start) / 1000, 3),
            "b_start_to_partitions_assigned_s": round((assigned_ms - b_start) / 1000, 3),
            "b_start_to_first_command_processed_s": round((created.timestamp_ms - b_start) / 1000, 3),
            "engine_b_peak_rss_mb": peak_rss_mb(b),
        })
        say(out)
    finally:
        client.close()
        probe_tap.close()
        stop(b)
    return out


def _end_offset(bench: Bench, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bench.bootstrap, "group.id": f"{bench.namespace}.probe"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), 10)[1]
    finally:
        c.close()
