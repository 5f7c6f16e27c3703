"""Activities scheduled and completed per second, with a fixed number in flight.

One engine with 4 partitions. A scripted worker STARTs and COMPLETEs every attempt as
soon as it receives it (both commands go to the activity's partition, in order). The
scheduler sends IN_FLIGHT SCHEDULEs, then one more each time an activity closes (an
ActivityTaskCompleted event, or Failed / TimedOut, which should not happen), until
`count` were scheduled. After a warm-up (not measured):
  activities/s = count / (last ActivityTaskCompleted timestamp_ms - first send)
  latency      = ActivityTaskCompleted timestamp_ms - the time the client sent the SCHEDULE
The scheduler, the worker and the engine share the machine's cores.
"""

from __future__ import annotations

import time

from bench.activity_common import ACT, Reader, ScriptedWorker, schedule_value, send_command, send_schedule
from bench.common import Bench, CpuMeter, engine_counters, loadavg, now_ms, peak_rss_mb, percentiles, say
from streamproc.client import SyncClient
from streamproc.protocol.records import ActivityIntent as A
from streamproc.protocol.records import Record

PARTITIONS = 4
QUEUE = "bench-throughput"
IN_FLIGHT = 100
WARMUP = 300
START_TO_CLOSE_MS = 60_000


def run(bench: Bench, quick: bool) -> dict:
    count = 3000 if quick else 20_000
    out: dict = {"activities": count, "in_flight": IN_FLIGHT, "partitions": PARTITIONS, "load1_at_start": loadavg()}
    with bench.running_engine("activities", PARTITIONS) as engine:
        worker = ScriptedWorker(bench, QUEUE, PARTITIONS, _start_and_complete)
        worker.start()
        client = SyncClient(bench.bootstrap, bench.namespace)
        try:
            _measure(client, worker, bench, "warmup", WARMUP, engine)  # topics, caches, assignments
            out.update(_measure(client, worker, bench, "measured", count, engine))
        finally:
            worker.close()
            client.close()
        out["engine_peak_rss_mb"] = peak_rss_mb(engine)
    return out


def _start_and_complete(task: Record, worker: ScriptedWorker) -> None:
    attempt = task.value["attempt"]
    send_command(worker.client, A.START, task.key, attempt=attempt, identity="bench")
    send_command(worker.client, A.COMPLETE, task.key, attempt=attempt, result='{"ok": true}')


def _measure(client: SyncClient, worker: ScriptedWorker, bench: Bench, tag: str, count: int, engine) -> dict:
    events = Reader(bench, bench.topics.events, list(range(PARTITIONS)), from_end=True)
    tasks_before = len(worker.tasks)
    transactions_before = engine_counters(engine)["transactions"]
    cpu_meter = CpuMeter({"engine": [engine.pid], "broker": [bench.broker_pid]})  # client: this process
    sent: dict[str, float] = {}
    first_send = now_ms()
    deadline = time.monotonic() + 60 + count / 50

    def closed() -> int:
        return events.count(A.COMPLETED) + events.count(A.FAILED) + events.count(A.TIMED_OUT)

    while closed() < count:
        room = min(count - len(sent), IN_FLIGHT - (len(sent) - closed()))
        for _ in range(max(0, room)):
            activity_id = f"{tag}-{len(sent)}"
            sent[activity_id] = now_ms()
            send_schedule(client, schedule_value(activity_id, QUEUE, start_to_close_ms=START_TO_CLOSE_MS))
        events.poll(0.02)
        worker.check()
        if time.monotonic() > deadline:
            raise TimeoutError(f"{tag}: {closed()} of {count} closed; counts {events.summary()}")
    client.flush()
    send_seconds = (now_ms() - first_send) / 1000
    time.sleep(0.3)
    events.poll(0.3)  # duplicates or rejections would show up now
    cpu_by_role = cpu_meter.read()
    cpu = cpu_by_role["engine"]
    transactions = engine_counters(engine)["transactions"] - transactions_before
    completed = {e.value["activity_id"]: e.timestamp_ms for e in events.decode(A.COMPLETED)
                 if e.record_type == "EVENT"}
    scheduled = {e.value["activity_id"]: e.timestamp_ms for e in events.decode(A.SCHEDULED)
                 if e.record_type == "EVENT"}
    latencies = [completed[a] - sent[a] for a in sent if a in completed]
    seconds = (max(completed.values()) - first_send) / 1000
    tasks = [t for _, t in worker.tasks[tasks_before:] if t.value_type == ACT]
    result = {
        "activities": count,
        "activities_per_sec": round(count / seconds, 1),
        "seconds": round(seconds, 3),
        "latency_ms": percentiles(latencies),
        "stages_ms": {"send_to_scheduled": percentiles([scheduled[a] - sent[a] for a in sent if a in scheduled]),
                      "scheduled_to_completed": percentiles([completed[a] - scheduled[a] for a in completed
                                                             if a in scheduled])},
        "engine_cpu_seconds": round(cpu, 2),
        "engine_cpu_ms_per_activity": round(cpu * 1000 / count, 3),
        # the scripted worker is a thread of the client
        "cpu_seconds_by_role": cpu_by_role,
        "transactions": transactions, "transactions_per_sec": round(transactions / seconds, 1),
        "completed_events": len(completed), "tasks_received": len(tasks),
        "distinct_tasks_received": len({(t.key, t.value["attempt"]) for t in tasks}), "event_counts": events.summary(), "rejections": events.rejections(),
        "scheduler_loop_seconds": round(send_seconds, 2),
    }
    events.close()
    say(tag, result)
    return result
