"""What a workflow costs the broker, counted rather than timed: `python -m bench.workflow_broker_cost`.

The rig of `workflows_1_activity` and `workflows_10_sequential` (an engine, a worker
process, the bench starting runs and reading their close events, 100 in flight), with the
broker's own counters (`bench/broker_requests.py`) read after the warm-up and after the
measured runs. One JSON line per shape, per workflow: the engine's transactions; the
broker's requests by API; fetch requests by topic, which say whose they were (the engine
fetches `commands`, the worker `workflow-tasks`, `tasks` and `replies`, the bench
`events`); the consumers' long polls that expired with nothing to return; produce requests
per transaction by topic; records and bytes in by topic. With `--by-client`, the broker's
request log is on for the measured runs (`bench/broker_request_log.py`) and the line also
has the requests by client role, API and topics, the fetches that returned nothing, and the
bytes each role produced by topic (logging every request slows the broker, so batches and
transactions per workflow may differ from a run without it). Counts hold on a busy
machine, where timings do not. Needs a local broker started by `streamproc broker start`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.broker_request_log import RequestLog  # noqa: E402
from bench.broker_requests import broker_counts, counts_since, per_unit  # noqa: E402
from bench.common import Bench  # noqa: E402
from bench.workflow_common import PARTITIONS, WorkflowRig, closed_loop  # noqa: E402

#: shape: (workflow type, its argument: activities per run).
SHAPES = {"workflows_1_activity": ("BenchOneActivity", 1),
          "workflows_10_sequential": ("BenchSequentialActivities", 10)}


def count_shape(bench: Bench, shape: str, workflows: int, warmup: int, in_flight: int, partitions: int,
                workers: int, by_client: bool) -> dict:
    workflow_type, arg = SHAPES[shape]
    rig = WorkflowRig(bench, partitions, workers)
    log = RequestLog(bench.broker_pid, bench.bootstrap, bench.namespace) if by_client else None
    try:
        if warmup:
            closed_loop(rig, "warmup", warmup, in_flight, workflow_type, arg, 120 + warmup * arg / 10)
        before = broker_counts(bench.broker_pid)
        if log is not None:
            log.start()
        try:
            loop = closed_loop(rig, "measured", workflows, in_flight, workflow_type, arg,
                               120 + workflows * arg / 10)
        finally:
            if log is not None:
                log.stop()
        grown = counts_since(before, broker_counts(bench.broker_pid), bench.namespace)
    finally:
        rig.close()
    by_role = {}
    if log is not None:
        by_role = {kind: {name: round(n / workflows, 3) for name, n in sorted(counts.items())}
                   for kind, counts in log.counts().items()}
    return {"shape": shape, "workflows": workflows, "in_flight": in_flight, "partitions": partitions,
            "worker_processes": workers, "not_completed": len(loop["not_completed"]),
            **per_unit(grown, workflows, loop["transactions"], "workflow"), **by_role}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=",".join(SHAPES), help=f"comma separated, of {', '.join(SHAPES)}")
    parser.add_argument("--workflows", type=int, default=300, help="measured runs per shape (default 300)")
    parser.add_argument("--warmup", type=int, default=100, help="runs before the first reading (default 100)")
    parser.add_argument("--in-flight", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=PARTITIONS)
    parser.add_argument("--workers", type=int, default=1, help="worker processes")
    parser.add_argument("--by-client", action="store_true",
                        help="the broker's request log on for the measured runs: requests by client role")
    args = parser.parse_args()
    shapes = args.shapes.split(",")
    if unknown := [s for s in shapes if s not in SHAPES]:
        parser.error(f"unknown shape {unknown[0]!r}: one of {', '.join(SHAPES)}")
    bench = Bench("workflow_broker_cost")
    if bench.broker_pid is None:
        parser.error("the broker's counters are read from its JVM: a local broker is needed")
    try:
        for shape in shapes:
            bench.fresh_namespace(shape)
            line = count_shape(bench, shape, args.workflows, args.warmup, args.in_flight, args.partitions,
                               args.workers, args.by_client)
            print(json.dumps(line), flush=True)
    finally:
        bench.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
