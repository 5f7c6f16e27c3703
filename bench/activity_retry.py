"""Retry precision: the gap between consecutive attempt starts of activities that time out.

Each activity has start_to_close 1 s and a retry policy of initial interval 1 s,
coefficient 1.0, so an attempt that hangs is retried at (its start + 1 s timeout + 1 s
backoff): the nominal gap between two attempt starts is 2,000 ms. A scripted worker
STARTs every attempt as soon as it receives it and never answers it.

An attempt's start is the time the engine processed its START: the timestamp_ms of the
ATTEMPT_STARTED reply (the START carries reply_partition). This is exactly the
started_time the engine keeps and measures start_to_close from, so no latency estimate
is needed. The gap beyond 2,000 ms is split into stages with the task record of the
next attempt, whose scheduled_time_ms is (processing time of the TIME_OUT) + 1 s backoff
and whose timestamp_ms is the processing time of the DISPATCH:
  timeout_fire_lag  = (scheduled_time_ms - 1000) - (start + 1000)
  dispatch_lag      = task timestamp_ms - scheduled_time_ms
  dispatch_to_start = next start - task timestamp_ms (task delivery, worker, START processing)
Each timer lag splits again at the Kafka timestamp of the TIME_OUT / DISPATCH command the
due-date checker wrote: "checker wrote it" (write - due) and "round trip" (processed - write:
transaction commit, the engine consuming its own command, processing).
The schedules are spread evenly over STAGGER_MS so the timers of different activities
do not all fall into the same millisecond, after a warm-up (activities that complete at
once), so that the engine's first-use costs do not bunch the first schedules together.
"""

from __future__ import annotations

import time

from bench.activity_common import (ACT, REPLY_PARTITION, Reader, ScriptedWorker, by_key_attempt, schedule_value,
                                   schedule_staggered, send_command, timer_writes, warm_up)
from bench.common import Bench, cpu_seconds, loadavg, log_lines, peak_rss_mb, percentiles, say
from streamproc.client import SyncClient
from streamproc.protocol.records import ActivityIntent as A
from streamproc.protocol.records import Record

PARTITIONS = 4
QUEUE = "bench-retry"
START_TO_CLOSE_MS = 1000
INITIAL_INTERVAL_MS = 1000
NOMINAL_GAP_MS = START_TO_CLOSE_MS + INITIAL_INTERVAL_MS
STAGGER_MS = 1000


def run(bench: Bench, quick: bool) -> dict:
    activities, gaps = (10, 3) if quick else (50, 5)
    out: dict = {"activities": activities, "gaps_per_activity": gaps, "partitions": PARTITIONS,
                 "start_to_close_ms": START_TO_CLOSE_MS, "retry_initial_interval_ms": INITIAL_INTERVAL_MS,
                 "backoff_coefficient": 1.0, "maximum_attempts": gaps + 1, "nominal_gap_ms": NOMINAL_GAP_MS,
                 "schedules_spread_over_ms": STAGGER_MS, "load1_at_start": loadavg()}
    with bench.running_engine("retry", PARTITIONS) as engine:
        cpu_before = cpu_seconds(engine)
        out.update(_measure(bench, activities, gaps))
        out["engine_cpu_seconds"] = round(cpu_seconds(engine) - cpu_before, 2)
        out["engine_peak_rss_mb"] = peak_rss_mb(engine)
    stopped = [line for line in log_lines(engine) if line.get("event") == "engine_stopped"]
    if stopped:  # warm-up included: a handful of transactions
        out["engine_transactions"] = {k: stopped[-1][k] for k in ("transactions", "commands", "due_commands", "echoes")}
    return out


def _start_at_once(task: Record, worker: ScriptedWorker) -> None:
    send_command(worker.client, A.START, task.key, reply=True, attempt=task.value["attempt"], identity="bench")


def _measure(bench: Bench, activities: int, gaps: int) -> dict:
    attempts = gaps + 1
    events = Reader(bench, bench.topics.events, list(range(PARTITIONS)))
    replies = Reader(bench, bench.topics.replies, [REPLY_PARTITION])
    worker = ScriptedWorker(bench, QUEUE, PARTITIONS, _start_at_once)
    worker.start()
    client = SyncClient(bench.bootstrap, bench.namespace)
    try:
        warm_up(client, worker, events, replies)
        schedule_staggered(client, activities, STAGGER_MS, lambda i: schedule_value(
            f"retry-{i}", QUEUE, start_to_close_ms=START_TO_CLOSE_MS, initial_interval_ms=INITIAL_INTERVAL_MS,
            backoff_coefficient=1.0, maximum_attempts=attempts))
        wait_s = 60 + attempts * NOMINAL_GAP_MS / 1000
        events.wait(lambda: events.count(A.TIMED_OUT) >= activities or worker.error is not None,
                    wait_s, f"{activities} ActivityTaskTimedOut")
        worker.check()
        time.sleep(0.3)
        events.poll(0.2)
        replies.wait(lambda: replies.count(A.ATTEMPT_STARTED) >= activities * attempts, 10,
                     f"{activities * attempts} ATTEMPT_STARTED replies")
        replies.poll(0.2)
    finally:
        worker.close()
        client.close()
    result = _analyse(events, replies, worker, timer_writes(bench, PARTITIONS), activities, attempts)
    events.close()
    replies.close()
    say("retry precision", result)
    return result


def _analyse(events: Reader, replies: Reader, worker: ScriptedWorker, writes: dict, activities: int,
             attempts: int) -> dict:
    starts = {k: r.timestamp_ms for k, r in by_key_attempt(replies.decode(A.ATTEMPT_STARTED)).items()}
    tasks = by_key_attempt([t for _, t in worker.tasks if t.value_type == ACT])
    received = {(t.key, t.value["attempt"]): at for at, t in worker.tasks}
    gaps, timeout_lag, dispatch_lag, to_start, delivery = [], [], [], [], []
    split: dict[str, list[float]] = {"timeout_checker_write": [], "timeout_round_trip": [],
                                     "dispatch_checker_write": [], "dispatch_round_trip": []}
    for (key, attempt), started in starts.items():
        nxt = starts.get((key, attempt + 1))
        task = tasks.get((key, attempt + 1))
        if nxt is None or task is None:
            continue
        sched = task.value["scheduled_time_ms"]
        gaps.append(nxt - started)
        timeout_lag.append((sched - INITIAL_INTERVAL_MS) - (started + START_TO_CLOSE_MS))
        dispatch_lag.append(task.timestamp_ms - sched)
        to_start.append(nxt - task.timestamp_ms)
        delivery.append(received[(key, attempt + 1)] - task.timestamp_ms)
        timeout_cmd = writes.get((A.TIME_OUT, key, attempt))
        dispatch_cmd = writes.get((A.DISPATCH, key, attempt + 1))
        if timeout_cmd and dispatch_cmd:
            split["timeout_checker_write"].append(timeout_cmd[1] - timeout_cmd[0])
            split["timeout_round_trip"].append(sched - INITIAL_INTERVAL_MS - timeout_cmd[1])
            split["dispatch_checker_write"].append(dispatch_cmd[1] - dispatch_cmd[0])
            split["dispatch_round_trip"].append(task.timestamp_ms - dispatch_cmd[1])
    timed_out = [e for e in events.decode(A.TIMED_OUT) if e.record_type == "EVENT"]
    final_lag = [e.timestamp_ms - (e.value["started_time_ms"] + START_TO_CLOSE_MS) for e in timed_out]
    deviation = [g - NOMINAL_GAP_MS for g in gaps]
    retry_states: dict[str, int] = {}
    for e in timed_out:
        name = f"{e.value['failure']['timeout_type']}/{e.value['retry_state']}"
        retry_states[name] = retry_states.get(name, 0) + 1
    duplicates = len(worker.tasks) - len(tasks)
    return {
        "gap_ms": {**percentiles(gaps), "min": min(gaps, default=None)},
        "deviation_from_nominal_ms": {**percentiles(deviation), "min": min(deviation, default=None)},
        "p99_within_20_ms_of_nominal": bool(deviation) and percentiles(deviation)["p99"] <= 20,
        "gap_stages_ms": {"timeout_fire_lag": percentiles(timeout_lag), "dispatch_lag": percentiles(dispatch_lag),
                          "dispatch_to_start": percentiles(to_start),
                          "dispatch_to_worker_receipt": percentiles(delivery),
                          **{name: percentiles(values) for name, values in split.items()}},
        "last_attempt_timeout_lag_ms": percentiles(final_lag),
        "timed_out_events": len(timed_out), "timed_out_by_type_and_retry_state": retry_states,
        "attempts_started": len(starts), "expected_attempts_started": activities * attempts,
        "tasks_received": len(worker.tasks), "duplicate_tasks": duplicates,
        "event_counts": events.summary(), "rejections": events.rejections(),
    }
