"""create -> start -> complete throughput and latency, on 1 and on 4 partitions.

Per partition count: a fresh namespace, an engine process and worker processes (handler
returns at once). After a warm-up, N jobs are created as fast as the client can send
(saturation): jobs/s = N / (last COMPLETED event's timestamp - first send). Then jobs are
created at half that rate for a while (paced) to see the latency of an engine that keeps
up. Latency of a job = its COMPLETED event's timestamp_ms (engine clock) - the time the
client sent its CREATE (same machine clock, epoch ms).
"""

from __future__ import annotations

import subprocess
import time
import uuid

from bench.common import (Bench, CpuMeter, EventTap, group_assignment, loadavg, now_ms, peak_rss_mb, percentiles, say,
                          stop, wait_group_stable, wait_log)
from streamproc.client import Client

QUEUE = "bench"
WARMUP = 200
LIGHT_RATE = 100  # the latency floor, far from saturation


def run(bench: Bench, quick: bool, workers: int = 2, profile: str | None = None,
        profile_idle: bool = False) -> dict:
    jobs = 3000 if quick else 20_000
    paced_seconds = 4 if quick else 10
    out: dict = {"jobs": jobs, "workers": workers, "load1_at_start": loadavg()}
    for partitions in (1, 4):
        out[f"p{partitions}"] = _run_partitions(bench, partitions, jobs, paced_seconds, workers,
                                                profile if partitions == 4 else None, profile_idle)
    if profile:
        out["profiled"] = "p4 saturation" + (" (wall clock, idle included)" if profile_idle else " (on-CPU)")
    return out


def _run_partitions(bench: Bench, partitions: int, jobs: int, paced_seconds: float, workers: int,
                    profile: str | None, profile_idle: bool) -> dict:
    bench.fresh_namespace(f"p{partitions}")
    engine = bench.engine(f"engine-p{partitions}-{uuid.uuid4().hex[:6]}", partitions)
    wait_log(engine, "partitions_assigned", 90)
    procs = [bench.worker(QUEUE, f"p{partitions}-w{i}") for i in range(workers)]
    for w in procs:
        wait_log(w, "tasks_assigned", 90)
    # cooperative rebalancing goes on after the first assignment: wait for the final one
    workers_group = bench.topics.worker_group(QUEUE)
    wait_group_stable(bench, workers_group, workers, partitions)
    tap = EventTap(bench, partitions)
    client = Client(bench.bootstrap, bench.namespace)
    try:
        cpu = CpuMeter({"engine": [engine.pid], "workers": [w.pid for w in procs], "broker": [bench.broker_pid]})
        _measure(client, tap, WARMUP, None, cpu)  # topics, group assignments, caches: not measured
        spy = _attach_profiler(engine, profile, profile_idle) if profile else None
        saturated = _measure(client, tap, jobs, None, cpu)
        if spy is not None:
            spy.send_signal(2)  # SIGINT: py-spy writes the profile and exits
            spy.wait(60)
        rate = saturated["jobs_per_sec"] / 2
        paced = _measure(client, tap, max(1, int(rate * paced_seconds)), rate, cpu)
        light = _measure(client, tap, int(LIGHT_RATE * paced_seconds / 2), LIGHT_RATE, cpu)
        _, assignment = group_assignment(bench, workers_group)
        return {"saturation": saturated, "paced_half_rate": paced,
                f"paced_{LIGHT_RATE}_per_sec": light,
                "engine_peak_rss_mb": peak_rss_mb(engine), "task_partitions_by_worker_consumer": assignment}
    finally:
        client.close()
        tap.close()
        for p in (*procs, engine):
            stop(p)


def _measure(client: Client, tap: EventTap, jobs: int, rate: float | None, cpu_meter: CpuMeter) -> dict:
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
        client.create_job(QUEUE, {"i": i}, request_id=request_id)
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
        "event_transactions": tap.markers,
        "completed_events": tap.count("COMPLETED"),
        "created_events": tap.count("CREATED"),
        "rejections": tap.rejections(),
    }
    if rate:
        result["target_rate_per_sec"] = round(rate, 1)
    say(("paced" if rate else "saturation"), result)
    return result


def _attach_profiler(engine: subprocess.Popen, path: str, idle: bool) -> subprocess.Popen:
    """py-spy sampling the engine (without pausing it) until SIGINT; raw collapsed stacks."""
    spy = subprocess.Popen(["py-spy", "record", "--pid", str(engine.pid), "--format", "raw",
                            "--rate", "200", "--nonblocking", *(["--idle"] if idle else []), "-o", path],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    return spy
