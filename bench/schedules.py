"""Schedules (issue 17): how late actions start, and what idle schedules cost.

schedule_fire_lag: schedules with one action each (an interval of 1 s bounded by start =
end = the action time), one engine on 4 partitions (`--engines N`: N engine processes
sharing them; a START for a partition of another engine travels through the log), no worker (the start is what is
measured; the runs' task timeout is 120 s, so none times out while the phases are
measured). Burst: 10,000 actions due in the same second (the first phase, unless
`--spread-first`: the first after the engine was assigned its partitions). Spread: 10,000
spread evenly over 10 s: schedule times have a resolution of one second, so each
schedule's jitter (up to 999 ms, deterministic per schedule) spreads the 1,000 of each
second over it.
  lag_ms = WORKFLOW_EXECUTION_STARTED's timestamp - the action's due time (its nominal
  time plus its jitter; the burst has none). It includes the TRIGGER, the START to the
  workflow's partition and its processing; pass_lag_ms is the part until the schedule's
  pass (ACTION_STARTED's timestamp), start_after_pass_ms the rest (the START's way
  through the log to its partition, and its processing). engine_cpu_ms_per_action: the
  engine processes' CPU from the last CREATED to the last start, per action (they idle until
  the first is due); transactions: what they committed meanwhile; per_1000_actions: the
  engines' counters per 1,000 actions (transactions, relayed_commands: processed in the
  transaction that wrote them, commands: records read from the log, echoes: those of them
  skipped, as processed when written; a BATCH record counts one).

schedule_memory: N idle schedules (hourly, first action a day away) on 4 partitions.
  engine_rss_mb = the engine's peak RSS once all are created
  takeover_s    = a second engine with an empty state directory, the first one stopped:
                  from its start to the last partition_restored line (rebuilt from the
                  changelog alone)
"""

from __future__ import annotations

import time

import orjson

from bench.common import (
    Bench,
    EventTap,
    engine_counters,
    loadavg,
    log_time_ms,
    peak_rss_mb,
    percentiles,
    pid_cpu_seconds,
    say,
    stop,
    wait_log,
)
from streamproc.client import SyncClient
from streamproc.protocol.partitioning import partition_for
from streamproc.protocol.records import Record, ScheduleIntent, ValueType

PARTITIONS = 4
#: No worker takes the started workflows' tasks: each would time out and be scheduled again
#: after its task timeout (10 s by default; a run timeout would also end them all at once),
#: 10,000 commands as costly as the starts, falling on the next phase. The longest task
#: timeout (120 s) and no run timeout keep both phases clear of them.
WORKFLOW_TASK_TIMEOUT_MS = 120_000


def _definition(first_ms: int, last_ms: int | None, every_ms: int, jitter_ms: int = 0) -> str:
    return orjson.dumps({
        "action": {"start_workflow": {"workflow_id": "", "workflow_type": "BenchTick", "task_queue": "bench-ticks",
                                      "workflow_task_timeout_ms": WORKFLOW_TASK_TIMEOUT_MS}},
        "spec": {"interval": [{"interval_ms": every_ms}], "start_time_ms": first_ms, "end_time_ms": last_ms,
                 "jitter_ms": jitter_ms},
        "policy": {"overlap": "ALLOW_ALL"}}).decode()


def _create(client: SyncClient, tap: EventTap, schedules: list[tuple[str, str]]) -> float:
    """Send CREATEs without waiting for each answer; returns the seconds until all were CREATED."""
    began = time.monotonic()
    for schedule_id, definition in schedules:
        value = orjson.loads(definition)
        value["action"]["start_workflow"]["workflow_id"] = schedule_id
        client.send(Record.command(ValueType.SCHEDULE, ScheduleIntent.CREATE, {
            "schedule_id": schedule_id, "schedule": orjson.dumps(value).decode()}),
            partition_for(schedule_id, PARTITIONS))
    client.flush(120)
    tap.wait(lambda: tap.count("CREATED") >= len(schedules), 120 + len(schedules) / 200, "every CREATED")
    return time.monotonic() - began


def _engines_counters(engines: list) -> dict:
    """The engines' counters (`engine_counters`), added up."""
    total: dict = {}
    for engine in engines:
        for name, value in engine_counters(engine).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                total[name] = total.get(name, 0) + value
    return total


def run_fire_lag(bench: Bench, quick: bool, spread_first: bool = False, engines: int = 1) -> dict:
    count = 2000 if quick else 10_000
    spread_s = 3 if quick else 10
    out: dict = {"schedules": count, "partitions": PARTITIONS, "engines": engines, "load1_at_start": loadavg()}
    with bench.running_engines("schedules", PARTITIONS, engines) as procs:
        tap = EventTap(bench, PARTITIONS)
        client = SyncClient(bench.bootstrap, bench.namespace)
        phases = [("burst", 1), ("spread", spread_s)]
        for phase, spread in reversed(phases) if spread_first else phases:
            tap.forget()
            # Far enough ahead that every CREATE is processed before the first action is due.
            first_ms = (int(time.time()) + 10 + count // 1000) * 1000
            jitter_ms = 0 if spread == 1 else 999
            schedules = [(f"{phase}-{n}", _definition(t, t, 1000, jitter_ms))
                         for n in range(count) for t in [first_ms + (n * spread // count) * 1000]]
            created_s = _create(client, tap, schedules)
            counters, cpu_s = _engines_counters(procs), sum(pid_cpu_seconds(e.pid) for e in procs)
            tap.wait(lambda: tap.count("WORKFLOW_EXECUTION_STARTED") >= count, 120, "every action's start")
            cpu_s = sum(pid_cpu_seconds(e.pid) for e in procs) - cpu_s
            tap.poll(0.5)
            after = _engines_counters(procs)  # the last commit is counted once the engine's next step ends it
            transactions = after["transactions"] - counters["transactions"]
            # What the relay did (`engine/relay.py`), per 1,000 actions: commands processed in the
            # transaction that wrote them, records read from the log (echoes: skipped ones among them).
            per_1000 = {name: round((after[name] - counters[name]) * 1000 / count, 1)
                        for name in ("transactions", "relayed_commands", "commands", "echoes")}
            taken = {e.value["workflow_id"]: (orjson.loads(e.value["attributes"])["actual_time_ms"], e.timestamp_ms)
                     for e in tap.decode("ACTION_STARTED")}
            started = [(e.timestamp_ms, *taken[e.value["workflow_id"]])
                       for e in tap.decode("WORKFLOW_EXECUTION_STARTED") if e.value["workflow_id"] in taken]
            out[phase] = {"actions": len(started), "lag_ms": percentiles([at - due for at, due, _ in started]),
                          # the lag in two: to the schedule's pass (ACTION_STARTED), then to the start
                          "pass_lag_ms": percentiles([passed - due for _, due, passed in started]),
                          "start_after_pass_ms": percentiles([at - passed for at, _, passed in started]),
                          # from the last CREATED to the last start (idle until the first is due)
                          "engine_cpu_ms_per_action": round(cpu_s * 1000 / count, 3),
                          "transactions": transactions, "per_1000_actions": per_1000,
                          "create_s": round(created_s, 2), "spread_s": spread, "jitter_ms": jitter_ms,
                          "rejections": tap.rejections()}
            say(phase, out[phase])
        out["engine_peak_rss_mb"] = peak_rss_mb(procs[0]) if engines == 1 else [peak_rss_mb(e) for e in procs]
        client.close()
        tap.close()
    return out


def run_memory(bench: Bench, quick: bool) -> dict:
    count = 100_000 if quick else 1_000_000
    first = bench.engine("memory-a", PARTITIONS)
    out: dict = {"schedules": count, "partitions": PARTITIONS, "load1_at_start": loadavg()}
    try:
        wait_log(first, "partitions_assigned", 90)
        tap = EventTap(bench, PARTITIONS)
        client = SyncClient(bench.bootstrap, bench.namespace)
        first_ms = (int(time.time()) + 86_400) * 1000
        definition = _definition(first_ms, None, 3_600_000)
        created_s = 0.0
        for start in range(0, count, 50_000):  # in slices, so the producer queue never fills
            created_s += _create(client, tap, [(f"idle-{n:07d}", definition)
                                               for n in range(start, min(count, start + 50_000))])
            tap.forget()
        out["create_per_sec"] = round(count / created_s)
        out["engine_rss_mb"] = peak_rss_mb(first)
        client.close()
        tap.close()
        stop(first)
        second = bench.engine("memory-b", PARTITIONS)
        began = time.time() * 1000
        restored = wait_log(second, "partition_restored", 600, count=PARTITIONS)
        out["takeover_s"] = round((max(log_time_ms(line) for line in restored) - began) / 1000, 1)
        out["restored_records"] = sum(line["records"] for line in restored)
        out["takeover_rss_mb"] = peak_rss_mb(second)
        say("memory", out)
    finally:
        stop(first)
    return out
