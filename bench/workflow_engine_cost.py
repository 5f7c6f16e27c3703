"""What a workflow costs the engine, counted rather than timed on the wall:
`python -m bench.workflow_engine_cost [--count N] [--partitions P] [--batch B] [--repeats R] [--profile FILE]`.

The partition processors run in this process with a manual clock, no broker
(`bench/in_process_engine.py`). Two shapes, N workflows each, their ids spread over P
partitions as the engine would spread them, every phase sent in batches of B commands
(processed, written for the log, committed, as the engine's loop does):

- `activity`: a workflow of one remote activity. Phases: `start` (the client's START),
  `task1` (the first task's completion, scheduling the activity), `activity` (the
  worker's START, committed, then its COMPLETE), `task2` (the second task's completion,
  completing the run);
- `local_activity`: a workflow of one local activity. Phases: `start`, `task` (one
  completion carrying the activity's marker and the run's completion);
- `checkpointed_steps`: a workflow of ten local activities, a task per step, as
  `workflows_10_sequential_local --checkpoint-local-activities` runs them: each answer
  carries one marker and asks for the next task (`force_create_new_workflow_task`) handed
  back to it (`return_new_workflow_task`, with a reply partition). Phases: `start`,
  `first` (the first task's answer: that task came from the queue), `step` (the eight
  answers to handed-back tasks in between, the steady state: its count is also given per
  step), `close` (the last answer, the tenth marker and the run's completion).

Commands are shaped as the client and workers send them (a START naming where its close
goes, answers asking for a reply). Prints one JSON line per shape: the median over
`--repeats` of the CPU microseconds per workflow by phase, and the records per workflow by
kind. `--profile FILE` writes a cProfile of the last repeat (`python -m pstats FILE`).

CPU time varies with the machine's load; instructions do not. Under callgrind the tool
also prints the instructions per workflow of each phase:

    mkdir -p cg && ENGINE_COST_CALLGRIND=cg PYTHONHASHSEED=0 valgrind \
        --tool=callgrind --separate-threads=yes --callgrind-out-file=cg/callgrind.out.%p \
        "$(python -c 'import sys; print(sys.executable)')" -m bench.workflow_engine_cost --count 200 --repeats 1
"""

from __future__ import annotations

import argparse
import cProfile
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.in_process_engine import Instructions, Partitions  # noqa: E402
from streamproc.clock import ManualClock  # noqa: E402
from streamproc.protocol import codec  # noqa: E402
from streamproc.protocol.partitioning import partition_for, partition_of_key  # noqa: E402
from streamproc.protocol.records import Record, ValueType, WorkflowIntent  # noqa: E402

START_MS = 1_800_000_000_000
QUEUE = "bench-workflows"
ACTIVITY = {"type": "SCHEDULE_ACTIVITY_TASK", "activity_id": "1", "activity_type": "step", "task_queue": QUEUE,
            "input": '["x"]', "start_to_close_timeout_ms": 10_000}
MARKER = {"type": "RECORD_MARKER", "marker_name": "LocalActivity",
          "details": {"seq": "1", "activity_id": "1", "activity_type": "step", "attempt": 1, "result": '"done"'}}
COMPLETE = {"type": "COMPLETE_WORKFLOW_EXECUTION", "result": '"ok"'}
#: A checkpointing worker's flags: the answer is a workflow task heartbeat, the next task
#: is handed back to it (`worker/workflow_activation.py`).
CHECKPOINT = orjson.dumps({"force_create_new_workflow_task": True, "return_new_workflow_task": True}).decode()
#: Each shape's phases, in order: the workflow task completions (None: the activity's phase),
#: and the answer's flags (None: none, and no hand-back asked).
SHAPES = {"activity": {"start": None, "task1": [ACTIVITY], "activity": None, "task2": [COMPLETE]},
          "local_activity": {"start": None, "task": [MARKER, COMPLETE]},
          "checkpointed_steps": {"start": None, "first": ([MARKER], CHECKPOINT), "step": ([MARKER], CHECKPOINT),
                                 "close": [MARKER, COMPLETE]}}
#: How many times a phase runs per workflow (the others: once).
REPEATS = {("checkpointed_steps", "step"): 8}
#: History events per workflow of each shape.
EVENTS = {"activity": 11, "local_activity": 6, "checkpointed_steps": 2 + 10 * 4}


def _start(n: int) -> tuple[str, Record]:
    workflow_id = f"wf-{n}"
    return workflow_id, Record.command(ValueType.WORKFLOW, "START", {
        "workflow_id": workflow_id, "workflow_type": "Bench", "task_queue": QUEUE, "input": '["x"]',
        "workflow_run_timeout_ms": 60_000, "identity": "bench-client",
        "close_reply": {"partition": 0, "request_id": f"close-{n}", "follow_runs": True}},
        request_id=f"start-{n}", reply_partition=0)


def _task_complete(task: Record, commands: list[dict], flags: str | None = None) -> Record:
    """A workflow worker's answer to `task`, as `worker/workflow_activation.py` sends it
    (with `flags`, asking for the next task as a reply)."""
    v = task.value
    extra = {"attributes": flags} if flags is not None else {}
    return Record.command(ValueType.WORKFLOW, "TASK_COMPLETE", {
        "workflow_id": v["workflow_id"], "run_id": v["run_id"], "scheduled_event_id": v["scheduled_event_id"],
        "attempt": v["attempt"], "identity": "bench-worker", "commands": orjson.dumps(commands).decode(), **extra},
        key=task.key, **({"request_id": f"next-{task.key}-{v['scheduled_event_id']}", "reply_partition": 1}
                         if flags is not None else {}))


def _activity(task: Record, intent: str, **value) -> tuple[int, Record]:
    return partition_of_key(task.key), Record.command(ValueType.ACTIVITY_TASK, intent, {
        "attempt": task.value.get("attempt", 1), **value}, key=task.key, request_id=f"{intent}-{task.key}",
        reply_partition=0)


class Run:
    """One shape's N workflows through its phases, batch by batch."""

    def __init__(self, parts: Partitions, batch: int) -> None:
        self.parts = parts
        self.batch = batch
        self.tasks: list[Record] = []  # the task records of the last phase
        self.cpu: Counter = Counter()
        self.instructions = Instructions()

    def phase(self, name: str, commands: list[tuple[int, Record]]) -> None:
        self.tasks = []
        self.parts.clock.advance(1)  # each phase a moment later: a deadline armed again moves
        for _, cmd in commands:
            cmd.encoded = codec.encode(cmd)  # by the client or worker that sends it: not the engine's work
        for i in range(0, len(commands), self.batch):
            self.instructions.start()
            began = time.process_time()
            for pid, cmd in commands[i:i + self.batch]:
                self.parts.send(pid, cmd)
            replied = len(self.parts.replies)
            routed, tasks = self.parts.commit()
            self.cpu[name] += time.process_time() - began
            self.instructions.stop(name)
            assert not routed, "one-workflow shapes write no commands for other partitions"
            self.tasks += [task for _, task in tasks]
            self.tasks += [reply for _, reply in self.parts.replies[replied:]  # tasks handed back
                           if reply.intent == WorkflowIntent.WORKFLOW_TASK]


def one_shape(shape: str, count: int, partitions: int, batch: int, profiler: cProfile.Profile | None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        parts = Partitions(Path(tmp), partitions, ManualClock(start_ms=START_MS))
        try:
            run = Run(parts, batch)
            if profiler is not None:
                profiler.enable()
            for phase, commands in SHAPES[shape].items():
                if phase == "start":
                    run.phase(phase, [(partition_for(wid, partitions), cmd) for wid, cmd in map(_start, range(count))])
                elif phase == "activity":
                    activities = [t for t in run.tasks if t.value_type == ValueType.ACTIVITY_TASK]
                    run.phase(phase, [_activity(t, "START", identity="bench-worker") for t in activities])
                    run.phase(phase, [_activity(t, "COMPLETE", result='"done"') for t in activities])
                else:
                    commands, flags = commands if isinstance(commands, tuple) else (commands, None)
                    for _ in range(REPEATS.get((shape, phase), 1)):
                        answers = [t for t in run.tasks if t.value_type == ValueType.WORKFLOW]
                        assert len(answers) == count, f"{phase}: {len(answers)} workflow tasks for {count} runs"
                        run.phase(phase, [(partition_for(t.value["workflow_id"], partitions),
                                           _task_complete(t, commands, flags)) for t in answers])
            if profiler is not None:
                profiler.disable()
            assert parts.records["events"] == count * EVENTS[shape], parts.records
            return {"cpu": run.cpu, "instructions": run.instructions, "records": parts.records}
        finally:
            parts.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000, help="workflows of each shape (default 1000)")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--batch", type=int, default=100, help="commands per engine batch (default 100)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--shape", choices=sorted(SHAPES), action="append", help="default: both")
    parser.add_argument("--profile", help="write a cProfile of the last repeat here")
    args = parser.parse_args()
    if args.count < 1 or args.partitions < 1 or args.batch < 1 or args.repeats < 1:
        parser.error("--count, --partitions, --batch and --repeats must be at least 1")
    profiler = cProfile.Profile() if args.profile else None
    for shape in args.shape or list(SHAPES):
        one_shape(shape, min(args.count, 20), args.partitions, args.batch, None)  # first calls' costs: not counted
        runs = [one_shape(shape, args.count, args.partitions, args.batch, profiler if i == args.repeats - 1 else None)
                for i in range(args.repeats)]
        phases = list(SHAPES[shape])
        cpu = {p: statistics.median(r["cpu"][p] for r in runs) / args.count * 1e6 for p in phases}
        line = {"scenario": "workflow_engine_cost", "shape": shape, "workflows": args.count,
                "partitions": args.partitions, "batch": args.batch, "repeats": args.repeats,
                "cpu_us_per_workflow": {**{p: round(v) for p, v in cpu.items()}, "total": round(sum(cpu.values()))}}
        if runs[0]["instructions"]:
            counted = {p: statistics.median(r["instructions"][p] for r in runs) / args.count for p in phases}
            line["instructions_per_workflow"] = {**{p: round(v) for p, v in counted.items()},
                                                 "total": round(sum(counted.values()))}
            line["instructions_per_task"] = {p: round(counted[p] / REPEATS.get((shape, p), 1)) for p in phases}
        line["records_per_workflow"] = {k: round(v / args.count, 3) for k, v in sorted(runs[-1]["records"].items())}
        print(json.dumps(line))
    if profiler is not None:
        profiler.dump_stats(args.profile)


if __name__ == "__main__":
    main()
