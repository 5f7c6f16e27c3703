"""What a schedule's action costs the engine, counted rather than timed on the wall:
`python -m bench.schedule_cost [--count N] [--partitions P] [--repeats R] [--profile FILE] [--through-log]`.

Wall-clock lag needs a quiet machine; CPU seconds of the processing thread and record
counts do not (much). The partition processors run in this process with a manual clock,
no broker: N schedules (one action each, all due at the same time, spread over P
partitions by their ids as the engine would) are created, the clock moves to their time,
and each partition does what the engine's loop does: the checker collects what is due
(its cap per round), the TRIGGERs are processed, and the START commands they wrote are
processed on their workflow's partition in the same transaction, as an engine that owns
every partition relays them (`engine/relay.py`), and the batch is written for the log as
`bench/in_process_engine.py` says. (The engine relays each START right after its TRIGGER;
the tool takes all TRIGGERs first to count the two apart: the same work.) With `--through-log`, as an engine that does not own
the workflows' partitions: the TRIGGERs commit, and the STARTs are encoded, routed,
decoded and processed in a second transaction.
Kafka's own costs (produce calls, the commit) are not in the figure; the record counts
say how many produce calls the engine would make.

Prints one JSON line: the median over `--repeats` of the CPU microseconds per action in
the TRIGGER phase and the START phase, and the records per action by kind (events,
commands, tasks, replies, changelog; `due_commands`: the checker's records; `relayed`:
commands processed in the transaction that wrote them; `transactions`). `--profile
FILE` writes a cProfile of one repeat's processing (`python -m pstats FILE`).

CPU time still varies with the machine's load; instructions do not. Under callgrind the
tool also prints the instructions per action of each phase (the interpreter itself, not
a launcher script, must run under valgrind):

    mkdir -p cg && ENGINE_COST_CALLGRIND=cg PYTHONHASHSEED=0 valgrind \
        --tool=callgrind --callgrind-out-file=cg/callgrind.out.%p \
        "$(python -c 'import sys; print(sys.executable)')" -m bench.schedule_cost --count 400 --repeats 1
"""

from __future__ import annotations

import argparse
import cProfile
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.in_process_engine import Instructions, Partitions  # noqa: E402
from streamproc.clock import ManualClock  # noqa: E402
from streamproc.protocol import codec  # noqa: E402
from streamproc.protocol.partitioning import partition_for  # noqa: E402
from streamproc.protocol.records import Record, ScheduleIntent, ValueType  # noqa: E402

DUE_MS = 1_800_000_000_000  # a whole second, far from the clock's start


def _definition(workflow_id: str) -> str:
    return orjson.dumps({
        "action": {"start_workflow": {"workflow_id": workflow_id, "workflow_type": "BenchTick",
                                      "task_queue": "bench-ticks", "workflow_run_timeout_ms": 60_000}},
        "spec": {"interval": [{"interval_ms": 1000}], "start_time_ms": DUE_MS, "end_time_ms": DUE_MS},
        "policy": {"overlap": "ALLOW_ALL"}}).decode()


def one_burst(count: int, partitions: int, profiler: cProfile.Profile | None = None, relay: bool = True) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        clock = ManualClock(start_ms=DUE_MS - 60_000)
        parts = Partitions(Path(tmp), partitions, clock)
        try:
            for n in range(count):
                schedule_id = f"burst-{n}"
                parts.send(partition_for(schedule_id, partitions), Record.command(
                    ValueType.SCHEDULE, ScheduleIntent.CREATE,
                    {"schedule_id": schedule_id, "schedule": _definition(schedule_id)}))
            parts.commit(count=False)
            clock.set(DUE_MS)
            trigger_cpu = start_cpu = 0.0
            if profiler is not None:
                profiler.enable()
            instructions = Instructions()  # by phase, under valgrind
            while True:
                instructions.start()
                began = time.process_time()
                collected = 0
                for pid, checker in enumerate(parts.checkers):
                    for cmd in checker.collect(clock.now_ms()):
                        parts.records["due_commands"] += 1  # records on the log (a batch is one)
                        collected += 1
                        cmd.encoded = codec.encode(cmd)
                        parts.procs[pid].process_command(cmd, -1)
                # Through the log, the TRIGGERs' transaction commits and the STARTs are read
                # back for the next one; relayed, they are processed in the same transaction.
                routed = [] if relay else parts.commit()[0]
                trigger_cpu += time.process_time() - began
                instructions.stop("trigger")
                if not (collected if relay else routed):
                    break
                instructions.start()
                began = time.process_time()
                if relay:
                    parts.relay()
                    routed = parts.commit()[0]  # what was not relayed (nothing, here)
                for pid, cmd in routed:
                    parts.send(pid, cmd)
                if routed:
                    parts.commit()
                start_cpu += time.process_time() - began
                instructions.stop("start")
            if profiler is not None:
                profiler.disable()
            return {"instructions": instructions, "trigger_us": trigger_cpu / count * 1e6,
                    "start_us": start_cpu / count * 1e6, "records": {k: v / count for k, v in sorted(parts.records.items())}}
        finally:
            parts.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000, help="schedules due at once (default 2000)")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--profile", help="write a cProfile of the last repeat here")
    parser.add_argument("--through-log", action="store_true",
                        help="send the STARTs through the log, read back by a later transaction, as "
                             "an engine that does not own their partitions does (default: relayed)")
    args = parser.parse_args()
    runs = []
    for i in range(args.repeats):
        profiler = cProfile.Profile() if args.profile and i == args.repeats - 1 else None
        runs.append(one_burst(args.count, args.partitions, profiler, relay=not args.through_log))
        if profiler is not None:
            profiler.dump_stats(args.profile)
    assert all(r["records"]["tasks"] == 1 for r in runs), "every action starts one workflow, with its task"
    trigger = statistics.median(r["trigger_us"] for r in runs)
    start = statistics.median(r["start_us"] for r in runs)
    print(json.dumps({"scenario": "schedule_action_cost", "schedules": args.count, "partitions": args.partitions,
                      "starts": "through the log" if args.through_log else "relayed",
                      "repeats": args.repeats, "cpu_us_per_action": {
                          "trigger": round(trigger), "start": round(start), "total": round(trigger + start)},
                      **({"instructions_per_action": {phase: round(statistics.median(
                          r["instructions"][phase] for r in runs) / args.count) for phase in ("trigger", "start")}}
                         if runs[0]["instructions"] else {}),
                      "records_per_action": {k: round(v, 3) for k, v in runs[-1]["records"].items()}}))


if __name__ == "__main__":
    main()
