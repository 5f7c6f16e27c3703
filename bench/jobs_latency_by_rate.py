"""Create -> complete latency of jobs at a ladder of paced rates, with the CPU each rate costs.

`jobs_per_sec` measures latency at half of a burst's rate; this shows where on the way up
latency leaves the floor, and what the machine is busy with at each step (CPU seconds by
role, transactions). One engine and two workers per partition count, rates in order,
each for a few seconds; `max_rate_p99_within_ms` is the highest rate whose p99 stayed
within LATENCY_BOUND_MS.
"""

from __future__ import annotations

from bench.common import Bench, loadavg
from bench.jobs_rig import JobsRig

RATES = (100, 250, 500, 1000, 2000, 3000)
LATENCY_BOUND_MS = 50


def run(bench: Bench, quick: bool, workers: int = 2, partitions: int | None = None) -> dict:
    """`partitions`: only that partition count (default: 1, and 4 unless `quick`)."""
    seconds = 2 if quick else 5
    out: dict = {"rates_per_sec": list(RATES), "seconds_per_rate": seconds, "workers": workers,
                 "latency_bound_ms": LATENCY_BOUND_MS, "load1_at_start": loadavg()}
    counts = (partitions,) if partitions else (1,) if quick else (1, 4)
    for count in counts:
        with JobsRig(bench, count, workers) as rig:
            steps = [_step(rig.measure(int(rate * seconds), rate)) for rate in RATES]
            within = [s["rate_per_sec"] for s in steps if s["latency_ms"]["p99"] <= LATENCY_BOUND_MS]
            out[f"p{count}"] = {"steps": steps, "max_rate_p99_within_ms": max(within, default=None),
                                **rig.facts()}
    return out


def _step(measured: dict) -> dict:
    """The parts of a measurement that tell where the time and the CPU went."""
    seconds = measured["seconds"]
    cpu = measured["cpu_seconds"]
    return {
        "rate_per_sec": measured["target_rate_per_sec"],
        "latency_ms": measured["latency_ms"],
        "created_to_started_ms": measured["stages_ms"]["created_to_started"],
        "cpu_seconds": cpu,
        "cores_busy": round(sum(cpu.values()) / seconds, 2),
        "transactions_per_sec": measured["transactions_per_sec"],
        "event_transactions_per_sec": round(measured["event_transactions"] / seconds, 1),
        "rejections": measured["rejections"],
    }
