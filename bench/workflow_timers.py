"""Durable timer accuracy: how late a 1 s `workflow.sleep` fires.

One engine (4 partitions unless --partitions), one worker process. The bench keeps IN_FLIGHT runs of a
workflow that sleeps SLEEP_MS then returns, starting one more each time one closes, so
timers come due spread over time rather than all at once. For each run:
  late_ms (the p50_ms / p99_ms keys) = TIMER_FIRED event time - TIMER_STARTED event time
      - SLEEP_MS: both are the engine's clock when it processed the command that appended
      the event (the task answer that started the timer; the TIMER_FIRE the due-date
      checker wrote), so this is the lateness the engine adds, as the workflow's history shows
  result_after_due_ms = the bench read the run's close event - (TIMER_STARTED time + SLEEP_MS):
      lateness plus one workflow task round trip and the close event's way to the client
"""

from __future__ import annotations

from collections import Counter

from bench.common import Bench, loadavg, percentiles
from bench.workflow_common import (
    PARTITIONS,
    WorkflowRig,
    closed_loop,
    cost,
    measured_loop,
    report,
    stage_breakdown,
)

SLEEP_MS = 1000
IN_FLIGHT = 20


def run(bench: Bench, quick: bool, workers: int = 1, engines: int = 1,
        profile: str | None = None, profile_idle: bool = False,
        partitions: int = PARTITIONS) -> dict:
    count = 200 if quick else 1000
    out: dict = {"timers": count, "sleep_ms": SLEEP_MS, "in_flight": IN_FLIGHT, "partitions": partitions,
                 "worker_processes": workers, "engine_processes": engines, "load1_at_start": loadavg()}
    rig = WorkflowRig(bench, partitions, workers, engines)
    try:
        closed_loop(rig, "warmup", 20, IN_FLIGHT, "BenchOneTimer", SLEEP_MS, 120)
        loop = measured_loop(rig, out, profile, profile_idle, count, IN_FLIGHT, "BenchOneTimer", SLEEP_MS,
                             60 + count)
        late, after_due = [], []
        for workflow_id, history in loop["runs"].items():
            times = {e["event_type"]: e["event_time_ms"] for e in history}
            if "TIMER_STARTED" in times and "TIMER_FIRED" in times:
                due = times["TIMER_STARTED"] + SLEEP_MS
                late.append(times["TIMER_FIRED"] - due)
                after_due.append(loop["seen"][workflow_id] - due)
        late_ms = percentiles(late)
        out.update({
            "p50_ms": late_ms["p50"], "p99_ms": late_ms["p99"], "late_ms": late_ms,
            # how many timers were how late (ms), to tell a commit-sized tail from a few outliers
            "late_ms_counts": dict(sorted(Counter(late).items())),
            "result_after_due_ms": percentiles(after_due),
            "stages_ms": stage_breakdown(loop, ["TIMER_STARTED", "TIMER_FIRED", "WORKFLOW_TASK_COMPLETED",
                                                "WORKFLOW_EXECUTION_COMPLETED", "seen"]),
            "timers_per_sec": round(count / loop["seconds"], 1),
            **cost(loop, loop["seconds"], count),
            "not_completed": loop["not_completed"][:10],
        })
    finally:
        rig.close()
    return report("measured", out)
