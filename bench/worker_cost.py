"""What a workflow task costs the workflow worker, counted rather than timed on the wall:
`python -m bench.worker_cost [--count N] [--steps S] [--lot L] [--repeats R] [--profile FILE]`.

N workflows of S sequential local activities (`bench/workflow_definitions.py`), the worker
answering a task after each one (`checkpoint_local_activities`, each step's marker on the
log before the next step runs), as `workflows_10_sequential_local
--checkpoint-local-activities` runs them. No broker: the loop is worker -> engine ->
worker in this process. The engine's partition processors answer the worker's commands
(`bench/in_process_engine.py`, a manual clock); the worker is a real `WorkflowWorker`
whose producer only keeps what it is given. The worker's side of each task is its
production path:

- `first` (the run's first task, from the task queue): the record decoded as the queue's
  thread reads it, a new instance, the code run to its first local activity, the
  activity run on the worker's runner, the answer (its marker) encoded and produced;
- `handed` (every later task, handed back on the replies partition): the reply decoded
  and dispatched as the replies listener does, the task matched with the cached run, the
  code resumed, its next local activity run, the answer encoded and produced.

Tasks are taken in lots of L (as the handed-back thread takes what has arrived). Prints
one JSON line: the median over `--repeats` of the worker's CPU microseconds (the whole
process's, every thread: the local activities run on the runner's) per step and per
phase's task, and, under callgrind, instructions (all threads summed):

    mkdir -p cg && ENGINE_COST_CALLGRIND=cg PYTHONHASHSEED=0 valgrind \\
        --tool=callgrind --separate-threads=yes --callgrind-out-file=cg/callgrind.out.%p \\
        "$(python -c 'import sys; print(sys.executable)')" -m bench.worker_cost --count 100 --repeats 1

What it leaves out: librdkafka's own work (produce, fetch), and the engine's.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import statistics
import sys
import tempfile
import time
import types
from collections import Counter
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.in_process_engine import Instructions, Partitions  # noqa: E402
from bench.workflow_definitions import SequentialLocalActivities  # noqa: E402
from streamproc.client import client as client_module  # noqa: E402
from streamproc.clock import ManualClock  # noqa: E402
from streamproc.kafka.replies import ReplyListener  # noqa: E402
from streamproc.protocol import codec  # noqa: E402
from streamproc.protocol.partitioning import partition_for  # noqa: E402
from streamproc.protocol.records import Record, ValueType  # noqa: E402
from streamproc.worker.workflow_worker import WorkflowWorker  # noqa: E402

START_MS = 1_800_000_000_000
QUEUE = "bench-workflows"
PARTITIONS = 4
ENGINE_BATCH = 100


class KeptProducer:
    """A producer that keeps what it is given (topic, partition, value), delivered at once."""

    def __init__(self, config: dict) -> None:
        self.kept: list[tuple[str, int, bytes]] = []

    def produce(self, topic, value, key=None, partition=-1, headers=None, on_delivery=None) -> None:
        self.kept.append((topic, partition, value))
        if on_delivery is not None:
            on_delivery(None, None)

    def poll(self, timeout: float = 0) -> int:
        return 0

    def flush(self, timeout: float = 0) -> int:
        return 0

    def take(self) -> list[tuple[str, int, bytes]]:
        kept, self.kept = self.kept, []
        return kept


class TaskMessage:
    """A task record as the queue's consumer hands it over."""

    def __init__(self, record: Record, offset: int) -> None:
        self._value, self._offset = record.encoded, offset

    def value(self) -> bytes:
        return self._value

    def headers(self) -> list:
        return codec.AVRO_HEADERS

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return QUEUE

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset


def _start(n: int, steps: int) -> tuple[int, Record]:
    workflow_id = f"wf-{n}"
    return partition_for(workflow_id, PARTITIONS), Record.command(ValueType.WORKFLOW, "START", {
        "workflow_id": workflow_id, "workflow_type": "BenchSequentialLocalActivities", "task_queue": QUEUE,
        "input": json.dumps([steps]), "workflow_run_timeout_ms": 600_000, "identity": "bench-client"},
        request_id=f"start-{n}", reply_partition=1)


def _worker() -> tuple[WorkflowWorker, KeptProducer]:
    with mock.patch.object(client_module, "Producer", KeptProducer):
        worker = WorkflowWorker(QUEUE, [SequentialLocalActivities], bootstrap="127.0.0.1:1", namespace="bench",
                                identity="bench-worker", checkpoint_local_activities=True)
    worker.client._partitions = PARTITIONS
    worker.handed.replies = ReplyListener(worker.client.bootstrap, worker.client.topics, partition=0)
    return worker, worker.client._producer


class Loop:
    """N runs through worker and engine until none has a task left."""

    def __init__(self, parts: Partitions, lot: int, profiler: cProfile.Profile | None = None) -> None:
        self.parts = parts
        self.profiler = profiler
        self.lot = lot
        self.worker, self.producer = _worker()
        self.cpu: Counter = Counter()
        self.tasks: Counter = Counter()
        self.instructions = Instructions(all_threads=True)
        self._offset = 0

    def engine(self, commands: list[tuple[int, object]]) -> tuple[list[Record], list[Record]]:
        """The engine's batches for `commands`: the task records for the queue, the replies."""
        queued, self.parts.replies = [], []
        for i in range(0, len(commands), ENGINE_BATCH):
            for pid, cmd in commands[i:i + ENGINE_BATCH]:
                self.parts.send(pid, cmd)
            _, tasks = self.parts.commit()
            queued += [task for _, task in tasks]
        # Partition 0 is the worker's; the client's answers went to 1.
        return queued, [record for partition, record in self.parts.replies if partition == 0]

    def worker_phase(self, phase: str, records: list[Record]) -> list[tuple[int, object]]:
        """The worker answers `records` in lots; returns its answers as the engine reads them."""
        worker, listener = self.worker, self.worker.handed.replies
        self.instructions.start()  # once per phase: a dump costs callgrind seconds
        for i in range(0, len(records), self.lot):
            lot = records[i:i + self.lot]
            if self.profiler is not None:
                self.profiler.enable()
            began = time.process_time()
            if phase == "first":  # the queue's thread (without the flush and commit of its batch)
                waiting = []
                for record in lot:
                    self._offset += 1
                    pending = worker._answer(TaskMessage(record, self._offset))
                    if pending is not None:
                        waiting.append(pending)
                worker.handler.answer_when_local_activities_end(waiting, worker._send_answer)
            else:  # the replies listener's thread hands them over, the handed-back thread runs them
                for record in lot:
                    listener._dispatch(codec.decode(record.encoded, codec.AVRO_HEADERS), START_MS)
                with worker._turns:
                    worker._answer_handed(worker.handed.take())
            self.cpu[phase] += time.process_time() - began
            if self.profiler is not None:
                self.profiler.disable()
            self.tasks[phase] += len(lot)
        self.instructions.stop(phase)
        return [(partition, types.SimpleNamespace(encoded=value)) for _, partition, value in self.producer.take()]

    def close(self) -> None:
        self.worker.local_activities.close()
        self.worker.client.close()


def one_run(count: int, steps: int, lot: int, profiler: cProfile.Profile | None) -> Loop:
    with tempfile.TemporaryDirectory() as tmp:
        parts = Partitions(Path(tmp), PARTITIONS, ManualClock(start_ms=START_MS))
        loop = Loop(parts, lot, profiler)
        try:
            queued, replies = loop.engine([_start(n, steps) for n in range(count)])
            assert len(queued) == count and not replies, (len(queued), len(replies))
            answers = loop.worker_phase("first", queued)
            while answers:
                queued, replies = loop.engine(answers)
                assert not queued, f"{len(queued)} tasks went to the queue instead of being handed back"
                answers = loop.worker_phase("handed", replies) if replies else []
            stats = loop.worker.stats
            assert stats.completed == count * steps and not stats.failed and stats.cache_misses == 0, stats
            return loop
        finally:
            loop.close()
            parts.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=500, help="workflows (default 500)")
    parser.add_argument("--steps", type=int, default=10, help="local activities per workflow (default 10)")
    parser.add_argument("--lot", type=int, default=10, help="tasks the worker takes at once (default 10)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--profile", help="write a cProfile of the last repeat's worker phases here (its thread's CPU time)")
    args = parser.parse_args()
    if min(args.count, args.steps, args.lot, args.repeats) < 1:
        parser.error("--count, --steps, --lot and --repeats must be at least 1")
    # The worker's thread's CPU (the local activities run on other threads).
    profiler = cProfile.Profile(time.thread_time) if args.profile else None
    one_run(min(args.count, args.lot), args.steps, args.lot, None)  # first calls' costs: not counted
    runs = [one_run(args.count, args.steps, args.lot, profiler if i == args.repeats - 1 else None)
            for i in range(args.repeats)]
    steps = args.count * args.steps
    cpu = {p: statistics.median(r.cpu[p] for r in runs) for p in ("first", "handed")}
    line = {"scenario": "worker_cost", "workflows": args.count, "steps": args.steps, "lot": args.lot,
            "repeats": args.repeats,
            "cpu_us_per_step": round(sum(cpu.values()) / steps * 1e6, 1),
            "cpu_us_per_task": {p: round(v / runs[0].tasks[p] * 1e6, 1) for p, v in cpu.items()}}
    if runs[0].instructions:
        counted = {p: statistics.median(r.instructions[p] for r in runs) for p in ("first", "handed")}
        line["instructions_per_step"] = round(sum(counted.values()) / steps)
        line["instructions_per_task"] = {p: round(v / runs[0].tasks[p]) for p, v in counted.items()}
    print(json.dumps(line))
    if profiler is not None:
        profiler.dump_stats(args.profile)


if __name__ == "__main__":
    main()
