"""What the metrics cost, per unit of work: `python -m bench.metrics_cost`.

The metrics-on/off pairs of `bench/run.py --metrics` move ±25% from pair to pair on this
machine, so they cannot show a 3% effect. This measures the metrics' own code instead:
the hooks the engine and the workers call, with the real classes, on batches shaped like
those of a workflow bench, each timed over many repeats (median of `--repeats` rounds).
Divided by the engine's (or worker's) CPU per unit from a bench line of the same
sitting, it bounds the overhead from above: everything the metrics add is one of these.

- `engine_us_per_batch`: a batch's tally (one `command` per command, `rejections_in` over
  its events) and its `EngineMetrics.committed` (totals, two histograms, due lags);
- `worker_us_per_task`: `task_started` and `workflow_task_executed` for one task;
- `stats_us`: one statistics report of a task-queue consumer (the lag gauges), from a
  real consumer's statistics JSON when a broker answers, else a synthetic one of 4
  partitions; reports come every second per consumer;
- `scrape_us`: one Prometheus scrape of each registry (every 15 s by default).

One JSON line on stdout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prometheus_client import generate_latest  # noqa: E402

from streamproc.metrics.batch_tally import BatchTally  # noqa: E402
from streamproc.metrics.engine_metrics import EngineMetrics  # noqa: E402
from streamproc.metrics.worker_metrics import WorkerMetrics  # noqa: E402
from streamproc.protocol.records import Record, RecordType  # noqa: E402

#: The commands of a workflow of one remote activity (what the engine processes for it).
ONE_ACTIVITY_COMMANDS = (("WORKFLOW", "START"), ("WORKFLOW_TASK", "COMPLETE"), ("ACTIVITY", "START"),
                         ("ACTIVITY", "COMPLETE"), ("WORKFLOW_TASK", "COMPLETE"))
TOPIC = "bench.tasks"


def _median_us(fn, rounds: int, inner: int) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - start) / inner * 1e6)
    return statistics.median(samples)


def engine_batch(commands: int, events_per_command: int, partitions: int, rounds: int) -> float:
    """µs for one batch's metrics work, the batch being `commands` commands of the
    one-activity mix over `partitions`, each writing `events_per_command` events."""
    metrics = EngineMetrics()
    batch = [(i % partitions, Record.command(*ONE_ACTIVITY_COMMANDS[i % len(ONE_ACTIVITY_COMMANDS)]))
             for i in range(commands)]
    events = [Record(RecordType.EVENT, "WORKFLOW", "TASK_SCHEDULED") for _ in range(commands * events_per_command
                                                                             // partitions)]

    def one_batch() -> None:
        tally = BatchTally()
        for pid, cmd in batch:
            tally.command(pid, cmd)
        for pid in range(partitions):
            tally.rejections_in(pid, events)
        metrics.committed(tally, 0.004)
    return _median_us(one_batch, rounds, 200)


def worker_task(rounds: int) -> float:
    metrics = WorkerMetrics()

    def one_task() -> None:
        metrics.task_started("bench", "workflow", 1_000, 1_004)
        metrics.workflow_task_executed("bench", 0.0012)
    return _median_us(one_task, rounds, 2_000)


def statistics_json(bootstrap: str | None) -> tuple[str, str]:
    """A task-queue consumer's statistics report: a real one when a broker answers."""
    if bootstrap:
        try:
            return _real_statistics(bootstrap), "real"
        except Exception as exc:  # noqa: BLE001 - any failure: fall back and say so
            print(f"no real statistics ({exc}); using a synthetic report", file=sys.stderr)
    parts = {str(p): {"partition": p, "consumer_lag": 3, "committed_offset": 10, "ls_offset": 13}
             for p in (-1, 0, 1, 2, 3)}
    return json.dumps({"name": "c", "topics": {TOPIC: {"partitions": parts}}, "cgrp": {"state": "up"}}), "synthetic"


def _real_statistics(bootstrap: str) -> str:
    import uuid

    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic
    topic = f"bench-metrics-cost-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 4, 1)])[topic].result(30)
    seen: list[str] = []
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic, "statistics.interval.ms": 1000,
                         "stats_cb": seen.append, "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (seen and consumer.assignment() and len(seen) > 2):
            consumer.poll(0.2)
        if not seen:
            raise RuntimeError("no statistics within 30 s")
        return seen[-1].replace(topic, TOPIC)
    finally:
        consumer.close()
        admin.delete_topics([topic])


def stats_report(stats: str, rounds: int) -> float:
    metrics = WorkerMetrics()
    on_stats = metrics.consumer_config("bench", "workflow", TOPIC)["stats_cb"]
    return _median_us(lambda: on_stats(stats), rounds, 200)


def scrape(rounds: int) -> dict[str, float]:
    engine, worker = EngineMetrics(), WorkerMetrics()
    engine_batch_tally = BatchTally()
    for i in range(40):
        engine_batch_tally.command(i % 4, Record.command(*ONE_ACTIVITY_COMMANDS[i % 5]))
    engine.committed(engine_batch_tally, 0.004)
    worker.task_started("bench", "workflow", 1, 2)
    worker.workflow_task_executed("bench", 0.001)
    return {"engine": _median_us(lambda: generate_latest(engine.registry), rounds, 50),
            "worker": _median_us(lambda: generate_latest(worker.registry), rounds, 50)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=40, help="commands per batch")
    parser.add_argument("--events-per-command", type=int, default=6)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=15, help="rounds; the median is kept")
    parser.add_argument("--bootstrap", default=None, help="a broker to take a real statistics report from")
    args = parser.parse_args(argv)
    per_batch = engine_batch(args.commands, args.events_per_command, args.partitions, args.repeats)
    stats, kind = statistics_json(args.bootstrap)
    line = {"scenario": "metrics_cost", "commands_per_batch": args.commands,
            "events_per_command": args.events_per_command, "partitions": args.partitions,
            "engine_us_per_batch": round(per_batch, 2),
            "engine_us_per_command": round(per_batch / args.commands, 3),
            "worker_us_per_task": round(worker_task(args.repeats), 3),
            "stats_report": kind, "stats_bytes": len(stats), "stats_us": round(stats_report(stats, args.repeats), 2),
            "scrape_us": {k: round(v, 1) for k, v in scrape(args.repeats).items()}}
    print(json.dumps(line))


if __name__ == "__main__":
    main()
