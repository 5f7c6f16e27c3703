"""`python bench/run.py SCENARIO [--quick]`: one JSON line of results on stdout, logs on stderr.

Uses the broker named by STREAMPROC_BOOTSTRAP if it answers, else starts a local one.
Each run works in fresh random namespaces and deletes their topics at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.options import add_worker_mode_options  # noqa: E402 - the path above finds it

SCENARIOS = {
    "jobs_per_sec": "bench.jobs_per_sec",
    "jobs_latency_by_rate": "bench.jobs_latency_by_rate",
    "timeout_lag_ms": "bench.timeout_lag",
    "recovery_sec": "bench.recovery",
    "activity_retry_precision": "bench.activity_retry",
    "heartbeat_timeout_detection": "bench.activity_heartbeat",
    "activities_per_sec": "bench.activity_throughput",
    "workflows_1_activity": "bench.workflow_throughput:run_one_activity",
    "workflows_10_sequential": "bench.workflow_throughput:run_sequential",
    "workflows_1_local_activity": "bench.workflow_throughput:run_one_local_activity",
    "workflows_10_sequential_local": "bench.workflow_throughput:run_sequential_local",
    "workflow_latency_single": "bench.workflow_latency:run",
    "workflow_latency_single_local": "bench.workflow_latency:run_local",
    "timer_accuracy": "bench.workflow_timers:run",
    "broker_restart_recovery": "bench.broker_restart_recovery",
    "signal_throughput": "bench.workflow_messages:run_signals",
    "query_latency": "bench.workflow_messages:run_queries",
    "child_workflows": "bench.workflow_messages:run_children",
    "schedule_fire_lag": "bench.schedules:run_fire_lag",
    "schedule_memory": "bench.schedules:run_memory",
}
#: Scenarios that take --workers and --profile (worker processes; py-spy files prefix).
WORKFLOW_SCENARIOS = {"workflows_1_activity", "workflows_10_sequential", "workflows_1_local_activity",
                      "workflows_10_sequential_local", "workflow_latency_single", "workflow_latency_single_local",
                      "timer_accuracy", "signal_throughput", "query_latency", "child_workflows"}
#: Scenarios that take --workflows and --warmup (how many runs are measured and warm up first).
SIZED_SCENARIOS = {"workflows_1_activity", "workflows_10_sequential", "workflows_1_local_activity",
                   "workflows_10_sequential_local", "workflow_latency_single", "workflow_latency_single_local"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--quick", action="store_true", help="small sizes: finishes within a minute")
    parser.add_argument("--workers", type=int, default=None,
                        help="worker processes (jobs_per_sec: 2; workflow scenarios: 1)")
    parser.add_argument("--engines", type=int, default=1, help="engine processes (workflow scenarios, schedule_fire_lag)")
    parser.add_argument("--partitions", type=int, default=None,
                        help="partitions of the engine's topics and the task queues (workflow scenarios; "
                             "default the engine's, 4); jobs_latency_by_rate: only this partition count")
    parser.add_argument("--profile", metavar="FILE",
                        help="jobs_per_sec: py-spy the 4-partition engine during saturation, raw stacks to "
                             "FILE; workflow scenarios: the engines and workers while measured, FILE.engine-0 ...")
    parser.add_argument("--profile-idle", action="store_true",
                        help="with --profile: sample idle time too (wall clock: waits on Kafka show up)")
    parser.add_argument("--keep-topics", action="store_true")
    parser.add_argument("--spread-first", action="store_true",
                        help="schedule_fire_lag: the spread phase first, right after the engine's start")
    parser.add_argument("--warm-broker", action="store_true",
                        help="first run unmeasured workflows until the broker's JIT compiler is nearly idle "
                             "(a broker just started is a cold JVM; see bench/broker_jit.py)")
    parser.add_argument("--metrics", action="store_true",
                        help="engines and job workers serve Prometheus metrics (--metrics-port), to measure "
                             "what metrics cost")
    parser.add_argument("--broker-requests", action="store_true",
                        help="workflow throughput scenarios: the broker's requests per workflow by API, read "
                             "from its meters (JMX, a local broker) before and after the measured runs")
    add_worker_mode_options(parser)
    parser.add_argument("--workflows", type=int, default=None,
                        help="workflows measured, instead of the scenario's own count (throughput and latency "
                             "workflow scenarios; e.g. the sizes a peer's bench uses)")
    parser.add_argument("--warmup", type=int, default=None,
                        help="workflows run first and not measured (default: the scenario's, at most --workflows)")
    args = parser.parse_args()
    for flag, value in (("--workflows", args.workflows), ("--warmup", args.warmup)):
        if value is not None and (args.scenario not in SIZED_SCENARIOS or value < (1 if flag == "--workflows" else 0)):
            parser.error(f"{flag} takes a count (>= {1 if flag == '--workflows' else 0}) and one of: "
                         f"{', '.join(sorted(SIZED_SCENARIOS))}")

    # Only the result goes to stdout: anything else printed here or by libraries goes to stderr.
    result_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    import importlib

    from bench.broker_jit import WARM_JIT_SHARE, BrokerCpu, warm_broker
    from bench.common import Bench

    module_name, _, function_name = SCENARIOS[args.scenario].partition(":")
    scenario_run = getattr(importlib.import_module(module_name), function_name or "run")
    started = time.monotonic()
    machine_before, ours_before = _machine_busy_s(), _own_cpu_s()
    bench = Bench(args.scenario)
    if args.job_start_unconfirmed or args.job_push:
        bench.job_worker_options = (("--start-unconfirmed",) if args.job_start_unconfirmed else ()) + \
            (("--push",) if args.job_push else ())
    if args.engine_commit_interval_ms:
        bench.engine_options = ("--commit-interval-ms", str(args.engine_commit_interval_ms))
    bench.metrics = args.metrics
    bench.broker_requests = args.broker_requests and bench.broker_pid is not None
    warm_up_runs = warm_broker(bench.bootstrap, bench.broker_pid) if args.warm_broker else None
    broker_cpu = BrokerCpu(bench.broker_pid)
    try:
        kwargs = {}
        if args.scenario == "jobs_per_sec":
            kwargs = {"workers": args.workers or 2, "profile": args.profile, "profile_idle": args.profile_idle}
        elif args.scenario == "jobs_latency_by_rate":
            kwargs = {"workers": args.workers or 2, "partitions": args.partitions}
        elif args.scenario == "schedule_fire_lag":
            kwargs = {"spread_first": args.spread_first, "engines": args.engines}
        elif args.scenario in WORKFLOW_SCENARIOS:
            kwargs = {"workers": args.workers or 1, "engines": args.engines, "profile": args.profile,
                      "profile_idle": args.profile_idle}
            if args.partitions:
                kwargs["partitions"] = args.partitions
            if args.workflows is not None:
                kwargs["workflows"] = args.workflows
            if args.warmup is not None:
                kwargs["warmup_workflows"] = args.warmup
            if args.no_eager_activities:  # read by the worker processes
                from bench.workflow_worker_main import NO_EAGER_ENV
                os.environ[NO_EAGER_ENV] = "1"
            if args.checkpoint_local_activities:
                from bench.workflow_worker_main import CHECKPOINT_LOCAL_ENV
                os.environ[CHECKPOINT_LOCAL_ENV] = "1"
            if args.no_task_hand_back:
                from bench.workflow_worker_main import NO_HAND_BACK_ENV
                os.environ[NO_HAND_BACK_ENV] = "1"
            if args.no_task_ride_along:
                from bench.workflow_worker_main import NO_RIDE_ALONG_ENV
                os.environ[NO_RIDE_ALONG_ENV] = "1"
        result = scenario_run(bench, args.quick, **kwargs)
    finally:
        broker_cpu.read()  # before a broker started here stops
        bench.close(keep_topics=args.keep_topics)
    ours, broker = _own_cpu_s() - ours_before, broker_cpu.total_s
    if bench.broker is not None:  # a broker started here is a child: its CPU is in ours too
        ours = max(0.0, ours - broker)
    extra = {"eager_activities": not args.no_eager_activities,
             "checkpoint_local_activities": args.checkpoint_local_activities,
             "task_hand_back": not args.no_task_hand_back,
             "task_ride_along": not args.no_task_ride_along} \
        if args.scenario in WORKFLOW_SCENARIOS else {}
    if args.scenario.startswith("jobs_"):
        extra["job_start"] = "push" if args.job_push else "unconfirmed" if args.job_start_unconfirmed else "confirmed"
        extra["engine_commit_interval_ms"] = args.engine_commit_interval_ms
    if warm_up_runs is not None:
        extra["broker_warm_up_runs"] = warm_up_runs
    if (broker_cpu.jit_share or 0) >= WARM_JIT_SHARE:
        print(f"[bench] the broker spent {broker_cpu.jit_s} of its {broker_cpu.total_s} CPU seconds compiling: "
              f"a cold JVM, so these numbers are not its steady state (--warm-broker)", file=sys.stderr)
    line = {"scenario": args.scenario, "quick": args.quick, "metrics": args.metrics, **extra, **result,
            "wall_seconds": round(time.monotonic() - started, 1),
            # CPU the machine spent during the run: ours (bench, engines, workers), the
            # broker's (and the part its JIT compiler used: high while the broker is a cold
            # JVM, see bench/broker_jit.py), and the rest (anything else running on the
            # machine skews the numbers)
            "cpu_seconds": {"bench_and_children": round(ours, 1), "broker": round(broker, 1),
                            "broker_jit": round(broker_cpu.jit_s, 1),
                            "rest_of_machine": round(_machine_busy_s() - machine_before - ours - broker, 1)}}
    os.write(result_fd, (json.dumps(line) + "\n").encode())
    return 0


def _machine_busy_s() -> float:
    """Busy CPU seconds of the whole machine since boot (all cores), from /proc/stat."""
    fields = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _own_cpu_s() -> float:
    """CPU seconds of this process and its waited-for children (engines, workers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


if __name__ == "__main__":
    sys.exit(main())
