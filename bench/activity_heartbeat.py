"""Heartbeat timeout detection: how late the engine notices an activity stopped heartbeating.

Activities with heartbeat timeout 1 s and start_to_close 30 s. A scripted worker STARTs
each attempt as soon as it receives it, sends ONE HEARTBEAT, then nothing. START and
HEARTBEAT carry reply_partition: the timestamp_ms of the ATTEMPT_STARTED and
HEARTBEAT_RECORDED replies is the engine's processing time, i.e. exactly the times the
engine measures the heartbeat timeout from.

single_attempt (maximum_attempts 1): the heartbeat is sent HEARTBEAT_AFTER_MS after the
worker received the attempt, so it moves the deadline past the timer armed at START
(start + 1 s): that timer fires early, is rejected ("deadline moved", INVALID_STATE, one
rejection per activity is expected) and re-armed at heartbeat + 1 s.
  detection lag = ActivityTaskTimedOut timestamp_ms - (heartbeat processed + 1000)

with_retry (maximum_attempts 2, retry initial interval 1 s, coefficient 1.0): the one
heartbeat is sent right after the START, as a worker that heartbeats at once would.
Attempt 1 times out silently (no event for a retried attempt) and attempt 2 is
dispatched after the 1 s backoff:
  retry gap = attempt 2 task timestamp_ms (DISPATCH processed) - attempt 1 start
  (nominal: heartbeat delay + 1000 + 1000 ms; Temporal measured 2.84 s p50)
  detection lag of attempt 1 = (attempt 2 scheduled_time_ms - 1000) - (heartbeat + 1000)
The worker STARTs attempt 2 and never heartbeats it: it times out (HEARTBEAT,
MAXIMUM_ATTEMPTS_REACHED) at start + 1 s, the "no heartbeat at all" case.
Each detection lag splits at the Kafka timestamp of the TIME_OUT command the due-date
checker wrote: checker_write (write - deadline) and round_trip (processed - write).
Each variant warms its new task queue up first (activities that complete at once), so
first-use costs do not bunch the staggered schedules together.
"""

from __future__ import annotations

import time

from bench.activity_common import (ACT, REPLY_PARTITION, Reader, ScriptedWorker, by_key_attempt, schedule_value,
                                   schedule_staggered, send_command, timer_writes, warm_up)
from bench.common import Bench, cpu_seconds, loadavg, peak_rss_mb, percentiles, say
from streamproc.client import SyncClient
from streamproc.protocol.records import ActivityIntent as A
from streamproc.protocol.records import Record

PARTITIONS = 4
HEARTBEAT_TIMEOUT_MS = 1000
START_TO_CLOSE_MS = 30_000
INITIAL_INTERVAL_MS = 1000
HEARTBEAT_AFTER_MS = 300
STAGGER_MS = 1000


def run(bench: Bench, quick: bool) -> dict:
    activities = 30 if quick else 200
    out: dict = {"activities": activities, "partitions": PARTITIONS, "heartbeat_timeout_ms": HEARTBEAT_TIMEOUT_MS,
                 "start_to_close_ms": START_TO_CLOSE_MS, "schedules_spread_over_ms": STAGGER_MS,
                 "load1_at_start": loadavg()}
    with bench.running_engine("heartbeat", PARTITIONS) as engine:
        cpu_before = cpu_seconds(engine)
        out["single_attempt"] = _variant(bench, "hb1", activities, 1, HEARTBEAT_AFTER_MS)
        out["with_retry"] = _variant(bench, "hb2", activities, 2, 0)
        out["engine_cpu_seconds"] = round(cpu_seconds(engine) - cpu_before, 2)
        out["engine_peak_rss_mb"] = peak_rss_mb(engine)
    return out


def _worker_script(heartbeat_after_ms: float):
    """START every attempt; heartbeat attempt 1 once, after `heartbeat_after_ms`."""
    def on_task(task: Record, worker: ScriptedWorker) -> None:
        attempt = task.value["attempt"]
        send_command(worker.client, A.START, task.key, reply=True, attempt=attempt, identity="bench")
        if attempt != 1:
            return

        def beat() -> None:
            send_command(worker.client, A.HEARTBEAT, task.key, reply=True, attempt=attempt, details='"beat"')
        if heartbeat_after_ms > 0:
            worker.later(heartbeat_after_ms, beat)
        else:
            beat()
    return on_task


def _variant(bench: Bench, queue: str, activities: int, maximum_attempts: int, heartbeat_after_ms: float) -> dict:
    # from the end: what an earlier variant wrote is not counted
    events = Reader(bench, bench.topics.events, list(range(PARTITIONS)), from_end=True)
    replies = Reader(bench, bench.topics.replies, [REPLY_PARTITION], from_end=True)
    worker = ScriptedWorker(bench, queue, PARTITIONS, _worker_script(heartbeat_after_ms))
    worker.start()
    client = SyncClient(bench.bootstrap, bench.namespace)
    prefix = f"{queue}-"
    try:
        warm_up(client, worker, events, replies)
        schedule_staggered(client, activities, STAGGER_MS, lambda i: schedule_value(
            f"{prefix}{i}", queue, start_to_close_ms=START_TO_CLOSE_MS, heartbeat_ms=HEARTBEAT_TIMEOUT_MS,
            initial_interval_ms=INITIAL_INTERVAL_MS, backoff_coefficient=1.0, maximum_attempts=maximum_attempts))
        events.wait(lambda: worker.error is not None or events.count(A.TIMED_OUT) >= activities,
                    60 + 3 * maximum_attempts, f"{activities} ActivityTaskTimedOut")
        worker.check()
        time.sleep(0.3)
        events.poll(0.2)
        replies.poll(0.2)
    finally:
        worker.close()
        client.close()
    writes = timer_writes(bench, PARTITIONS)
    result = _analyse(events, replies, worker, writes, prefix, maximum_attempts, heartbeat_after_ms)
    events.close()
    replies.close()
    say(queue, result)
    return result


def _split(writes: dict, key: int, attempt: int, deadline: int, processed: int, into: dict) -> None:
    """Split a detection lag at the write time of the TIME_OUT that fired it."""
    cmd = writes.get((A.TIME_OUT, key, attempt))
    if cmd is not None:
        into.setdefault("checker_write", []).append(cmd[1] - deadline)
        into.setdefault("round_trip", []).append(processed - cmd[1])


def _analyse(events: Reader, replies: Reader, worker: ScriptedWorker, writes: dict, prefix: str,
             maximum_attempts: int, heartbeat_after_ms: float) -> dict:
    ours = lambda r: r.value["activity_id"].startswith(prefix)  # noqa: E731
    starts = {k: r.timestamp_ms for k, r in by_key_attempt([r for r in replies.decode(A.ATTEMPT_STARTED)
                                                             if ours(r)]).items()}
    beats = {k: r.timestamp_ms for k, r in by_key_attempt([r for r in replies.decode(A.HEARTBEAT_RECORDED)
                                                            if ours(r)]).items()}
    tasks = by_key_attempt([t for _, t in worker.tasks if t.value_type == ACT])
    timed_out = [e for e in events.decode(A.TIMED_OUT) if e.record_type == "EVENT" and ours(e)]
    states: dict[str, int] = {}
    for e in timed_out:
        name = f"attempt {e.value['attempt']} {e.value['failure']['timeout_type']}/{e.value['retry_state']}"
        states[name] = states.get(name, 0) + 1
    result: dict = {"maximum_attempts": maximum_attempts, "heartbeat_sent_after_ms": heartbeat_after_ms}
    if maximum_attempts == 1:
        lags, split = [], {}
        for e in timed_out:
            if (e.key, 1) in beats:
                deadline = beats[(e.key, 1)] + HEARTBEAT_TIMEOUT_MS
                lags.append(e.timestamp_ms - deadline)
                _split(writes, e.key, 1, deadline, e.timestamp_ms, split)
        result["detection_lag_ms"] = {**percentiles(lags), "min": min(lags, default=None)}
        result["detection_lag_split_ms"] = {k: percentiles(v) for k, v in split.items()}
        result["p99_within_20_ms_of_deadline"] = bool(lags) and percentiles(lags)["p99"] <= 20
    else:
        gaps, from_beat, lags, hb_delay, split1, split2 = [], [], [], [], {}, {}
        for (key, attempt), task in tasks.items():
            if attempt != 2 or (key, 1) not in starts or (key, 1) not in beats:
                continue
            start, beat = starts[(key, 1)], beats[(key, 1)]
            gaps.append(task.timestamp_ms - start)
            from_beat.append(task.timestamp_ms - beat)
            hb_delay.append(beat - start)
            timed_out_at = task.value["scheduled_time_ms"] - INITIAL_INTERVAL_MS
            lags.append(timed_out_at - (beat + HEARTBEAT_TIMEOUT_MS))
            _split(writes, key, 1, beat + HEARTBEAT_TIMEOUT_MS, timed_out_at, split1)
        no_beat = []
        for e in timed_out:
            if (e.key, 2) in starts:
                deadline = starts[(e.key, 2)] + HEARTBEAT_TIMEOUT_MS
                no_beat.append(e.timestamp_ms - deadline)
                _split(writes, e.key, 2, deadline, e.timestamp_ms, split2)
        result.update({
            "retry_gap_ms_attempt1_start_to_attempt2_dispatch": percentiles(gaps),
            "retry_gap_ms_heartbeat_to_attempt2_dispatch": percentiles(from_beat),
            "heartbeat_processed_after_start_ms": percentiles(hb_delay),
            "detection_lag_ms_attempt1": {**percentiles(lags), "min": min(lags, default=None)},
            "detection_lag_split_ms_attempt1": {k: percentiles(v) for k, v in split1.items()},
            "detection_lag_ms_attempt2_no_heartbeat": {**percentiles(no_beat), "min": min(no_beat, default=None)},
            "detection_lag_split_ms_attempt2": {k: percentiles(v) for k, v in split2.items()},
        })
    result.update({
        "timed_out_events": len(timed_out), "timed_out_by_attempt_type_and_retry_state": states,
        "attempts_started": len(starts), "heartbeats_recorded": len(beats),
        "tasks_received": len(worker.tasks), "duplicate_tasks": len(worker.tasks) - len(tasks),
        "event_counts": events.summary(), "rejections": events.rejections(),
    })
    return result
