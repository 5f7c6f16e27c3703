"""An engine and job workers on a fresh namespace, and one measurement of create -> start -> complete.

Used by `jobs_per_sec` (a burst, then paced rates) and `jobs_latency_by_rate` (a ladder of
paced rates). Latency of a job = its COMPLETED event's timestamp_ms (engine clock) - the
time the client sent its CREATE (same machine clock, epoch ms).
"""

from __future__ import annotations

import time
import uuid

from bench.common import (Bench, CpuMeter, EventTap, engine_counters, group_assignment, now_ms, peak_rss_mb,
                          percentiles, say, stop, wait_group_stable, wait_log)
from streamproc.client import SyncClient

QUEUE = "bench"
WARMUP = 200


class JobsRig:
    """`with JobsRig(bench, partitions, workers) as rig: rig.measure(jobs, rate)`; processes stop on exit."""

    def __init__(self, bench: Bench, partitions: int, workers: int, spread_creates: bool = False) -> None:
        self.bench = bench
        #: Each CREATE to the partition of its request id (as clients did before they kept new
        #: jobs on one partition for a while, `client/sticky_partitions.py`): to compare.
        self.spread_creates = spread_creates
        self.partitions = partitions
        self.workers = workers

    def __enter__(self) -> JobsRig:
        bench, partitions = self.bench, self.partitions
        bench.fresh_namespace(f"p{partitions}")
        self.engine = bench.engine(f"engine-p{partitions}-{uuid.uuid4().hex[:6]}", partitions)
        wait_log(self.engine, "partitions_assigned", 90)
        self.procs = [bench.worker(QUEUE, f"p{partitions}-w{i}") for i in range(self.workers)]
        for w in self.procs:
            wait_log(w, "tasks_assigned", 90)
        # cooperative rebalancing goes on after the first assignment: wait for the final one
        self.workers_group = bench.topics.worker_group(QUEUE)
        wait_group_stable(bench, self.workers_group, self.workers, partitions)
        self.tap = EventTap(bench, partitions)
        self.client = SyncClient(bench.bootstrap, bench.namespace)
        self.cpu = CpuMeter({"engine": [self.engine.pid], "workers": [w.pid for w in self.procs],
                             "broker": [bench.broker_pid]})
        self.measure(WARMUP, None)  # topics, group assignments, caches: not measured
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()
        self.tap.close()
        for p in (*self.procs, self.engine):
            stop(p)

    def facts(self) -> dict:
        """The engine's peak memory and which worker consumer got which task partitions."""
        _, assignment = group_assignment(self.bench, self.workers_group)
        return {"engine_peak_rss_mb": peak_rss_mb(self.engine), "task_partitions_by_worker_consumer": assignment}

    def measure(self, jobs: int, rate: float | None) -> dict:
        """Create `jobs` jobs, as fast as the client can (rate None) or at `rate` per second,
        and wait until all are COMPLETED."""
        transactions_before = engine_counters(self.engine)["transactions"]
        result = _measure(self.client, self.tap, jobs, rate, self.cpu, self.spread_creates)
        transactions = engine_counters(self.engine)["transactions"] - transactions_before
        result.update(transactions=transactions, transactions_per_sec=round(transactions / result["seconds"], 1))
        return result


def _measure(client: SyncClient, tap: EventTap, jobs: int, rate: float | None, cpu_meter: CpuMeter,
             spread_creates: bool = False) -> dict:
    tap.forget()
    cpu_meter.start()
    sent: dict[str, float] = {}
    started = time.monotonic()
    first_send = now_ms()
    for i in range(jobs):
        if rate:
            delay = started + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        request_id = uuid.uuid4().hex
        sent[request_id] = now_ms()
        client.create_job(QUEUE, {"i": i}, request_id=request_id, routing_key=request_id if spread_creates else None)
    client.flush()
    send_seconds = time.monotonic() - started
    tap.wait(lambda: tap.count("COMPLETED") >= jobs, 60 + jobs / 100, f"{jobs} COMPLETED")
    time.sleep(0.2)
    tap.poll(0.2)  # duplicates or rejections would show up now
    cpu = cpu_meter.read()
    events = tap.decode("CREATED", "STARTED", "COMPLETED")
    key_of = {e.request_id: e.key for e in events if e.intent == "CREATED" and e.request_id in sent}
    at = {intent: {e.key: e.timestamp_ms for e in events if e.intent == intent}
          for intent in ("CREATED", "STARTED", "COMPLETED")}
    done_at = at["COMPLETED"]
    latencies = [done_at[key] - sent[rid] for rid, key in key_of.items() if key in done_at]
    # where the time goes: send -> CREATED -> STARTED (task delivered, worker's START) -> COMPLETED
    stages = {
        "send_to_created": [at["CREATED"][key] - sent[rid] for rid, key in key_of.items()],
        "created_to_started": [at["STARTED"][k] - at["CREATED"][k] for k in key_of.values()],
        "started_to_completed": [done_at[k] - at["STARTED"][k] for k in key_of.values()],
    }
    last_done = max(done_at.values())
    seconds = (last_done - first_send) / 1000
    result = {
        "jobs": jobs,
        "jobs_per_sec": round(jobs / seconds, 1),
        "seconds": round(seconds, 3),
        "send_rate_per_sec": round(jobs / send_seconds, 1),
        "latency_ms": percentiles(latencies),
        "stages_ms": {name: percentiles(values) for name, values in stages.items()},
        # from the first send until the last COMPLETED was read, plus 0.4 s
        "cpu_seconds": cpu,
        # commit markers on the events topic: a transaction writing to k of its partitions is k
        "event_transactions": tap.markers,
        "completed_events": tap.count("COMPLETED"),
        "created_events": tap.count("CREATED"),
        "rejections": tap.rejections(),
    }
    if rate:
        result["target_rate_per_sec"] = round(rate, 1)
    say(("paced" if rate else "saturation"), result)
    return result
