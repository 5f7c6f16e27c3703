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

from bench.common import Bench, loadavg
from bench.jobs_rig import JobsRig

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
    with JobsRig(bench, partitions, workers) as rig:
        spy = _attach_profiler(rig.engine, profile, profile_idle) if profile else None
        saturated = rig.measure(jobs, None)
        if spy is not None:
            spy.send_signal(2)  # SIGINT: py-spy writes the profile and exits
            spy.wait(60)
        rate = saturated["jobs_per_sec"] / 2
        paced = rig.measure(max(1, int(rate * paced_seconds)), rate)
        light = rig.measure(int(LIGHT_RATE * paced_seconds / 2), LIGHT_RATE)
        return {"saturation": saturated, "paced_half_rate": paced, f"paced_{LIGHT_RATE}_per_sec": light,
                **rig.facts()}


def _attach_profiler(engine: subprocess.Popen, path: str, idle: bool) -> subprocess.Popen:
    """py-spy sampling the engine (without pausing it) until SIGINT; raw collapsed stacks."""
    spy = subprocess.Popen(["py-spy", "record", "--pid", str(engine.pid), "--format", "raw",
                            "--rate", "200", "--nonblocking", *(["--idle"] if idle else []), "-o", path],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    return spy
