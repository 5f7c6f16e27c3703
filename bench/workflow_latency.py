"""One workflow at a time (one trivial activity, remote or local): latency from START sent to
the result read.

One engine (4 partitions unless --partitions), one worker process. Each run starts when the previous one's
close event was read, so nothing queues: this is the path's own latency. After a
warm-up:
  p50_ms / p99_ms = the bench read WORKFLOW_EXECUTION_COMPLETED - the bench sent START
                    (what a client calling execute_workflow waits)
The floor: a run takes 3 engine transactions (START; the first task's answer, which
schedules the activity and starts it on the answering worker; the activity's COMPLETE,
which carries the second task's answer and completes the run: docs/performance.md) and 6
hops through Kafka (4 transactions with `--no-task-ride-along`). The bench times a Kafka
transaction on this broker (one record, commit; like the engine's, after an idle moment)
and reports that many of them as `transaction_floor_ms`. With a local activity
(`workflow_latency_single_local`) a run takes 2 transactions (START; the first task's
answer, which carries the activity's marker and completes the run) and 4 hops: the floor
is 2 of them.
"""

from __future__ import annotations

import os
import time
import uuid

from confluent_kafka import Producer

from bench.common import Bench, loadavg, percentiles
from bench.workflow_common import PARTITIONS, WorkflowRig, report, sized, warm_and_measure
from bench.workflow_throughput import ONE_ACTIVITY_STAGES, ONE_LOCAL_ACTIVITY_STAGES
from bench.workflow_worker_main import NO_RIDE_ALONG_ENV
from streamproc.kafka.config import producer_config

TRANSACTIONS_PER_WORKFLOW = 3
#: With `--no-task-ride-along` (`BENCH_NO_TASK_RIDE_ALONG`): the next task is a transaction of its own.
TRANSACTIONS_PER_WORKFLOW_WITHOUT_RIDE_ALONG = 4
TRANSACTIONS_PER_LOCAL_WORKFLOW = 2


def run(bench: Bench, quick: bool, **options) -> dict:
    riding = os.environ.get(NO_RIDE_ALONG_ENV) != "1"
    return _run(bench, quick, "BenchOneActivity", ONE_ACTIVITY_STAGES,
                TRANSACTIONS_PER_WORKFLOW if riding else TRANSACTIONS_PER_WORKFLOW_WITHOUT_RIDE_ALONG, **options)


def run_local(bench: Bench, quick: bool, **options) -> dict:
    return _run(bench, quick, "BenchOneLocalActivity", ONE_LOCAL_ACTIVITY_STAGES, TRANSACTIONS_PER_LOCAL_WORKFLOW,
                **options)


def _run(bench: Bench, quick: bool, workflow_type: str, stages: list[str], transactions_each: int,
         workers: int = 1, engines: int = 1, profile: str | None = None, profile_idle: bool = False,
         partitions: int = PARTITIONS, workflows: int | None = None, warmup_workflows: int | None = None) -> dict:
    count, warmup = sized(100 if quick else 500, 30, workflows, warmup_workflows)
    out: dict = {"workflows": count, "local_activities": workflow_type == "BenchOneLocalActivity",
                 "partitions": partitions, "worker_processes": workers, "engine_processes": engines,
                 "load1_at_start": loadavg()}
    rig = WorkflowRig(bench, partitions, workers, engines)
    try:
        warm_and_measure(rig, out, profile, profile_idle, workflow_type, 1, 1, count, warmup, 60 + count, stages)
        transaction = transaction_ms(bench, 30 if quick else 100)
        out["transaction_ms"] = transaction
        out["transaction_floor_ms"] = round(transactions_each * transaction["p50"], 1)
    finally:
        rig.close()
    return report("measured", out)


def transaction_ms(bench: Bench, count: int, idle_s: float = 0.005) -> dict:
    """begin, produce one record, commit: wall time of each, `idle_s` apart (percentiles, ms)."""
    producer = Producer(producer_config(bench.bootstrap, **{
        "transactional.id": f"{bench.namespace}.bench-probe.{uuid.uuid4().hex[:6]}",
        "linger.ms": 0, "retry.backoff.ms": 2, "retry.backoff.max.ms": 50}))
    producer.init_transactions(30)
    times = []
    for n in range(count + 5):  # the first ones add the partition to the coordinator's cache
        time.sleep(idle_s)
        began = time.perf_counter()
        producer.begin_transaction()
        producer.produce(bench.topics.replies, b"probe", partition=0)
        producer.commit_transaction(30)
        if n >= 5:
            times.append((time.perf_counter() - began) * 1000)
    return percentiles(times)
