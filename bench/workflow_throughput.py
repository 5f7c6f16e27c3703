"""Workflows per second with 100 in flight: one trivial activity each, or 10 sequential ones;
remote activities, or local ones (run by the workflow worker inside the workflow task).

One engine (4 partitions unless --partitions) and worker processes running the combined Worker share the
machine with the broker and the bench. The bench starts IN_FLIGHT runs, then one more
each time a run's close event is read, until `count` were started. After a warm-up
(not measured):
  workflows/s  = count / (last close read by the bench - first START sent)
  activities/s = activities completed (ActivityTaskCompleted events, or a local activity's
                 MarkerRecorded) / the same time
  latency      = close event read by the bench - START sent (client_seen; the p50_ms /
                 p99_ms keys), and WORKFLOW_EXECUTION_COMPLETED's event time - START sent
Stages split each run at its history events (engine times).
"""

from __future__ import annotations

from bench.common import Bench, loadavg
from bench.workflow_common import PARTITIONS, WorkflowRig, report, sized, warm_and_measure

IN_FLIGHT = 100
ONE_ACTIVITY_STAGES = ["sent", "WORKFLOW_EXECUTION_STARTED", "WORKFLOW_TASK_COMPLETED",
                       "ACTIVITY_TASK_COMPLETED", "WORKFLOW_EXECUTION_COMPLETED", "seen"]
SEQUENTIAL_STAGES = ["sent", "WORKFLOW_EXECUTION_STARTED", "WORKFLOW_EXECUTION_COMPLETED", "seen"]
ONE_LOCAL_ACTIVITY_STAGES = ["sent", "WORKFLOW_EXECUTION_STARTED", "WORKFLOW_TASK_COMPLETED",
                             "WORKFLOW_EXECUTION_COMPLETED", "seen"]


def run_one_activity(bench: Bench, quick: bool, **options) -> dict:
    count = 1000 if quick else 5000
    return _run(bench, "BenchOneActivity", 1, count, 200, ONE_ACTIVITY_STAGES, **options)


def run_sequential(bench: Bench, quick: bool, **options) -> dict:
    count = 200 if quick else 1000
    return _run(bench, "BenchSequentialActivities", 10, count, 50, SEQUENTIAL_STAGES, **options)


def run_one_local_activity(bench: Bench, quick: bool, **options) -> dict:
    count = 1000 if quick else 5000
    return _run(bench, "BenchOneLocalActivity", 1, count, 200, ONE_LOCAL_ACTIVITY_STAGES,
                step_event="MARKER_RECORDED", **options)


def run_sequential_local(bench: Bench, quick: bool, **options) -> dict:
    count = 200 if quick else 1000
    return _run(bench, "BenchSequentialLocalActivities", 10, count, 50, SEQUENTIAL_STAGES,
                step_event="MARKER_RECORDED", **options)


def _run(bench: Bench, workflow_type: str, activities_each: int, count: int, warmup: int,
         stages: list[str], workers: int = 1, engines: int = 1, profile: str | None = None,
         profile_idle: bool = False, partitions: int = PARTITIONS,
         step_event: str = "ACTIVITY_TASK_COMPLETED", workflows: int | None = None,
         warmup_workflows: int | None = None) -> dict:
    count, warmup = sized(count, warmup, workflows, warmup_workflows)
    out: dict = {"workflows": count, "activities_per_workflow": activities_each,
                 "local_activities": step_event == "MARKER_RECORDED", "in_flight": IN_FLIGHT,
                 "partitions": partitions, "worker_processes": workers, "engine_processes": engines,
                 "load1_at_start": loadavg()}
    rig = WorkflowRig(bench, partitions, workers, engines)
    try:
        loop = warm_and_measure(rig, out, profile, profile_idle, workflow_type, activities_each, IN_FLIGHT, count,
                                warmup, 60 + count * activities_each / 20, stages)
        completed_activities = loop["counts"].get(f"EVENT:{step_event}", 0)
        out.update({
            "workflows_per_sec": round(count / loop["seconds"], 1),
            "activities_per_sec": round(completed_activities / loop["seconds"], 1),
            "seconds": round(loop["seconds"], 3),
            "event_counts": loop["counts"],
        })
        out["peak_rss_mb"] = rig.peak_rss()
    finally:
        rig.close()
    return report("measured", out)
