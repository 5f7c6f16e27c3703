"""What a workflow costs the broker, counted rather than timed: `python -m bench.workflow_cost`.

Timings need a quiet machine; these counts do not. An engine (4 partitions; `--engines N`
share them), a client and workers run in this process against a real broker. For each
shape (a workflow of one remote activity, of ten sequential remote activities, of one local
activity, of ten sequential local activities; a job, created and handled by a job worker) the tool runs `--count` of them
one at a time (each waited for: a transaction then carries one run's work, so the counts
repeat exactly), then `--count` all in flight at once (transactions carry many runs:
fewer transactions, more partitions each). It prints one JSON line per shape and pass,
per run:

- `transactions`: the engine's committed transactions;
- `records`: records the engine produced, by topic kind (events, changelog, activity and
  workflow task topics, replies, commands), and the changelog's by column family;
- `partitions_per_transaction`: distinct topic partitions a transaction wrote (avg, max,
  and the average by topic kind), not counting the consumer offsets' partition every
  transaction also adds; `partition_writes`: their sum over a workflow's transactions;
- `bytes`: keys and values the engine produced, by topic kind (headers not counted), and
  the changelog's by column family;
- `ride_along`: answers the worker sent with an activity's completion, accepted, refused,
  and completions that went without one, by reason (`worker/ride_along.py`).

It counts at the engine's batch writer (`streamproc/kafka/batch_writer.py`), where every
record of a transaction is produced, through a counting wrapper around its producer.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.options import add_worker_mode_options  # noqa: E402
from bench.workflow_definitions import (  # noqa: E402
    OneActivity,
    OneLocalActivity,
    SequentialActivities,
    SequentialLocalActivities,
    echo,
)
from streamproc.kafka import batch_writer  # noqa: E402
from streamproc.kafka.changelog import HISTORY_EVENTS  # noqa: E402
from streamproc.state.families import Family  # noqa: E402

QUEUE = "cost"
SHAPES = {"1_activity": (OneActivity, 1), "10_sequential": (SequentialActivities, 10),
          "1_local_activity": (OneLocalActivity, 1), "10_sequential_local": (SequentialLocalActivities, 10)}


class WriteTally:
    """Records and partitions of every transaction the engine's batch writer fills."""

    def __init__(self, namespace: str) -> None:
        self._prefix = f"{namespace}."
        self.records: Counter[str] = Counter()
        self.changelog: Counter[str] = Counter()
        self.bytes: Counter[str] = Counter()
        self.changelog_bytes: Counter[str] = Counter()
        self.transactions = 0
        self.partitions: list[int] = []
        #: Partitions written per topic kind, summed over transactions.
        self.kind_partitions: Counter[str] = Counter()
        #: Per batch writer (one per engine), the partitions of its open transaction.
        self._current: dict[int, set[tuple[str, int]]] = {}

    def begun(self, writer: int) -> None:
        self._end(writer)
        self.transactions += 1
        self._current[writer] = set()

    def ended(self) -> None:
        for writer in list(self._current):
            self._end(writer)

    def _end(self, writer: int) -> None:
        current = self._current.pop(writer, None)
        if current:
            self.partitions.append(len(current))
            self.kind_partitions.update(self._kind(topic) for topic, _ in current)

    def produced(self, writer: int, topic: str, partition: int, key: bytes | None, value: bytes | None) -> None:
        kind = self._kind(topic)
        self.records[kind] += 1
        self.bytes[kind] += len(key or b"") + len(value or b"")
        if kind == "changelog":
            self.changelog[_changelog_kind(key[0])] += 1
            self.changelog_bytes[_changelog_kind(key[0])] += len(key) + len(value or b"")
        self._current.setdefault(writer, set()).add((topic, partition))

    def _kind(self, topic: str) -> str:
        return topic.removeprefix(self._prefix).split(".")[0]

    def reset(self) -> None:
        self.__init__(self._prefix[:-1])


def _changelog_kind(first_byte: int) -> str:
    return "history_events" if first_byte == HISTORY_EVENTS else Family(first_byte).name.lower()


class _CountingProducer:
    """The writer's producer, counting what it is given."""

    def __init__(self, producer, tally: WriteTally, writer: int) -> None:
        self._producer = producer
        self._tally = tally
        self._writer = writer

    def produce(self, topic, value=None, key=None, partition=-1, **kwargs):
        self._tally.produced(self._writer, topic, partition, key, value)
        return self._producer.produce(topic, value, key, partition=partition, **kwargs)


def count_writes(tally: WriteTally) -> None:
    """Every batch writer of this process counts into `tally` from now on."""
    begin = batch_writer.BatchWriter.begin

    def counting_begin(writer, producer):
        tally.begun(id(writer))
        begin(writer, _CountingProducer(producer, tally, id(writer)))

    batch_writer.BatchWriter.begin = counting_begin


def _per_workflow(tally: WriteTally, committed: int, count: int) -> dict:
    tally.ended()
    parts = tally.partitions
    return {
        "transactions": round(committed / count, 2),
        "records": {kind: round(n / count, 2) for kind, n in sorted(tally.records.items())},
        "records_total": round(sum(tally.records.values()) / count, 2),
        "bytes": {kind: round(n / count) for kind, n in sorted(tally.bytes.items())},
        "changelog_by_family": {name: round(n / count, 2) for name, n in sorted(tally.changelog.items())},
        "changelog_bytes_by_family": {name: round(n / count) for name, n in sorted(tally.changelog_bytes.items())},
        "partitions_per_transaction": {"avg": round(sum(parts) / len(parts), 2) if parts else 0,
                                       "max": max(parts, default=0),
                                       **{kind: round(n / len(parts), 2) for kind, n in
                                          sorted(tally.kind_partitions.items())}},
        "partition_writes": round(sum(parts) / count, 2),
    }


@contextlib.contextmanager
def _workflow_runs(client, workflow, arg):
    """A run: a workflow started and its result waited for."""
    yield lambda name: client.start_workflow(workflow.run, arg, id=name, task_queue=QUEUE).result(120)


@contextlib.contextmanager
def _job_runs(bootstrap: str, namespace: str, client, start_unconfirmed: bool):
    """A run: a job created (on queue `cost-jobs`) and handled by a JobWorker of this process."""
    from streamproc.worker.job_worker import JobWorker

    handled: dict[str, threading.Event] = {}
    lock = threading.Lock()

    def handled_event(name: str) -> threading.Event:
        with lock:
            return handled.setdefault(name, threading.Event())

    worker = JobWorker("cost-jobs", lambda job: handled_event(job.payload["name"]).set(), bootstrap=bootstrap,
                       namespace=namespace, worker_id="cost", start_unconfirmed=start_unconfirmed)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()

    def run(name: str) -> None:
        client.create_job("cost-jobs", {"name": name})  # sent soon by the producer (flush is not for threads)
        if not handled_event(name).wait(120):
            raise TimeoutError(f"job {name} was not handled within 120 s")

    try:
        yield run
    finally:
        worker.stop()
        thread.join(30)


def _committed(engines) -> int:
    return sum(engine.stats.batches for engine in engines)


def _run_pass(engines, tally: WriteTally, run, count: int, in_flight: bool) -> dict:
    """`run(n)` `count` times, one after the other or all at once; the counts per run."""
    _quiet(engines)
    tally.reset()
    before = _committed(engines)
    if in_flight:  # a thread per run, so that the STARTs do not wait for each other either
        with ThreadPoolExecutor(count) as pool:
            list(pool.map(run, range(count)))
    else:
        for n in range(count):
            run(n)
    _quiet(engines)
    return _per_workflow(tally, _committed(engines) - before, count)


def _ride_along(worker, since: dict | None = None) -> dict:
    """The worker's ride-along counts (answers sent with an activity's completion, accepted,
    refused, completions without one by reason), since `since` when given."""
    stats = worker.workflow_worker.stats
    now = {"sent": stats.ride_along_sent, "accepted": stats.rode_along, "refused": stats.ride_along_refused,
           "skipped": dict(stats.ride_along_skipped)}
    if since is None:
        return now
    skipped = {r: n - since["skipped"].get(r, 0) for r, n in now["skipped"].items() if n - since["skipped"].get(r, 0)}
    return {**{k: now[k] - since[k] for k in ("sent", "accepted", "refused")}, "skipped": skipped}


def _quiet(engines, settle_s: float = 0.5) -> None:
    """Wait until the engines committed nothing for `settle_s` (the last batch's echoes too)."""
    last, since = _committed(engines), time.monotonic()
    while time.monotonic() - since < settle_s:
        time.sleep(0.05)
        if _committed(engines) != last:
            last, since = _committed(engines), time.monotonic()


def _start_engines(settings, count: int) -> list:
    """`count` engines in threads of this process, once they share every partition."""
    import dataclasses

    from streamproc.kafka.engine import Engine

    engines = [Engine(dataclasses.replace(settings, engine_id=f"cost-{n}"), idle_poll_ms=10) for n in range(count)]
    for engine in engines:
        threading.Thread(target=engine.run, daemon=True).start()
    deadline = time.monotonic() + 90
    while sorted(p for e in engines for p in e.partitions) != list(range(settings.partitions)) \
            or not all(e.partitions for e in engines) or not all(e.restored() for e in engines):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the engines did not share the partitions: {[sorted(e.partitions) for e in engines]}")
        time.sleep(0.1)
    return engines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20, help="workflows of each shape and pass (default 20)")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--engines", type=int, default=1, help="engines sharing the partitions (default 1)")
    parser.add_argument("--shape", choices=sorted([*SHAPES, "job"]), action="append", help="default: every shape")
    add_worker_mode_options(parser)
    parser.add_argument("--bootstrap", default=None, help="default STREAMPROC_BOOTSTRAP, or a local broker")
    args = parser.parse_args()

    import os

    # Only the counts go to stdout: the engine's and the worker's logs go to stderr.
    result = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    from streamproc.client import Client
    from streamproc.settings import Settings
    from streamproc.worker import Worker

    bootstrap = args.bootstrap or os.environ.get("STREAMPROC_BOOTSTRAP") or _local_broker()
    namespace = f"cost-{uuid.uuid4().hex[:6]}"
    tally = WriteTally(namespace)
    count_writes(tally)
    workflows = [SHAPES[s][0] for s in SHAPES]
    try:
        with tempfile.TemporaryDirectory() as state_dir:
            settings = Settings(bootstrap=bootstrap, namespace=namespace, partitions=args.partitions,
                                state_dir=Path(state_dir), engine_id="cost")
            engines = _start_engines(settings, args.engines)
            with Client(bootstrap, namespace) as client, \
                    Worker(client, task_queue=QUEUE, workflows=workflows, activities=[echo], identity="cost",
                           disable_eager_activity_execution=args.no_eager_activities,
                           checkpoint_local_activities=args.checkpoint_local_activities,
                           disable_workflow_task_hand_back=args.no_task_hand_back,
                           disable_workflow_task_ride_along=args.no_task_ride_along) as worker:
                for name in args.shape or [*SHAPES, "job"]:
                    runs = (_job_runs(bootstrap, namespace, client, args.job_start_unconfirmed) if name == "job"
                            else _workflow_runs(client, *SHAPES[name]))
                    with runs as run:
                        # Warm-up: topics created, partitions known, the worker's caches filled.
                        _run_pass(engines, tally, lambda n: run(f"warm-{n}"), 4, in_flight=False)
                        for in_flight in (False, True):
                            tag = "many" if in_flight else "one"
                            before = _ride_along(worker)
                            counts = _run_pass(engines, tally, lambda n: run(f"{tag}-{n}"), args.count, in_flight)
                            counts["ride_along"] = _ride_along(worker, before)
                            line = {"shape": name, "runs": args.count, "partitions": args.partitions,
                                    "engines": args.engines,
                                    "eager_activities": not args.no_eager_activities,
                                    "checkpoint_local_activities": args.checkpoint_local_activities,
                                    "task_hand_back": not args.no_task_hand_back,
                                    "task_ride_along": not args.no_task_ride_along,
                                    "job_start_unconfirmed": args.job_start_unconfirmed,
                                    "in_flight": args.count if in_flight else 1, **counts}
                            print(json.dumps(line), file=result, flush=True)
            for engine in engines:
                engine.stop()
            time.sleep(1)  # their threads close their clients
    finally:
        _delete_topics(bootstrap, namespace)
    return 0


def _local_broker() -> str:
    from streamproc.devenv.broker_choice import ensure_broker

    address, _ = ensure_broker()
    return address


def _delete_topics(bootstrap: str, namespace: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [t for t in admin.list_topics(timeout=10).topics if t.startswith(f"{namespace}.")]
    if names:
        for future in admin.delete_topics(names, operation_timeout=30).values():
            future.exception(30)


if __name__ == "__main__":
    sys.exit(main())
