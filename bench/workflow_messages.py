"""Signals, queries and child workflows (issue 16): how many signals a second reach running workflows, how
long a signal takes to reach its handler, and how long a query takes.

signal_throughput: 100 running `BenchSignalSink` workflows, one engine and one worker
process. The bench sends SIGNAL commands itself (no reply asked: the events tell), round
robin over the workflows, keeping `window` signals whose handler has not run yet.
  signals_per_sec     = signals / (last handler run seen - first signal sent)
  recorded_p50/p99_ms = WORKFLOW_EXECUTION_SIGNALED read - SIGNAL sent (what handle.signal waits)
  handler_p50/p99_ms  = the WORKFLOW_TASK_COMPLETED after the signal read - SIGNAL sent (its
                        handler ran in that task)
First one signal at a time (`single_*`: the path's own latency), then with the window
full (`saturated_*`).

query_latency: `handle.query` round trips through the engine and the worker (the Python
client, one at a time). cached: 20 running `BenchSignalSink` workflows the worker has
in its sticky cache. uncached: completed `BenchLongHistory` runs of about 1,000 events
(200 timers): the worker dropped them when they closed, so each query fetches the whole
history (GET_HISTORY) and replays it.

child_workflows: `BenchParent` runs that each start 2 `BenchChild`ren at once and sum their
results, `in_flight` parents open at a time (a closed loop, as workflows_1_activity).
  workflows_per_sec = (parents + children) / (last parent close read - first START sent)
  p50/p99_ms        = a parent's close read - its START sent, with `in_flight` open (so about
                      in_flight / parents_per_sec: the queue, by Little's law)
  single_p50/p99_ms = the same, one parent at a time (the path's own latency: 3 workflows,
                      4 hops between partitions)
"""

from __future__ import annotations

import time

from bench.common import Bench, loadavg, now_ms, peek, percentiles
from bench.workflow_common import PARTITIONS, Window, WorkflowRig, cost, report
from streamproc.activity.payloads import encode_args
from streamproc.protocol import codec
from streamproc.protocol.partitioning import partition_for
from streamproc.protocol.records import Record, ValueType, WorkflowIntent

SINKS = 100
_SIGNALED = b"WORKFLOW_EXECUTION_SIGNALED"
_TASK_COMPLETED = b"WORKFLOW_TASK_COMPLETED"
_CLOSED = b"WORKFLOW_EXECUTION_COMPLETED"


class SignalTracker:
    """Signals in flight per workflow: when each was sent, recorded, handled."""

    def __init__(self, rig: WorkflowRig) -> None:
        self.rig = rig
        self.pending: dict[str, dict[str, dict]] = {}  # workflow id -> value -> times
        self.done: list[dict] = []

    def send(self, workflow_id: str, value: str) -> None:
        self.pending.setdefault(workflow_id, {})[value] = {"sent": now_ms()}
        self.rig.client.send(Record.command(ValueType.WORKFLOW, WorkflowIntent.SIGNAL, {
            "workflow_id": workflow_id, "run_id": "", "signal_name": "ping", "input": encode_args([value]),
            "identity": "bench"}, request_id=value), partition_for(workflow_id, self.rig.partitions))

    @property
    def in_flight(self) -> int:
        return sum(len(p) for p in self.pending.values())

    def poll(self) -> None:
        for raw in self.rig.events.poll(0.005):
            intent = peek(raw)[1]
            if intent not in (_SIGNALED, _TASK_COMPLETED):
                continue
            record = codec.decode(raw, codec.AVRO_HEADERS)
            mine = self.pending.get(record.value["workflow_id"], {})
            if intent == _SIGNALED:
                value = codec.decode(raw, codec.AVRO_HEADERS).value
                entry = mine.get(_value_of(value["attributes"]))
                if entry is not None:
                    entry.update(recorded=now_ms(), event_id=value["event_id"])
            else:
                handled = [v for v, e in mine.items() if e.get("event_id", 1 << 62) < record.value["event_id"]]
                for v in handled:
                    entry = mine.pop(v)
                    entry["handled"] = now_ms()
                    self.done.append(entry)

    def wait_all(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while self.in_flight:
            if time.monotonic() > deadline:
                self.rig.check_alive()
                raise TimeoutError(f"{self.in_flight} signals not handled within {timeout_s} s")
            self.poll()


def _value_of(attributes: str) -> str:
    import orjson

    return orjson.loads(orjson.loads(attributes)["input"])[0]


def _latencies(entries: list[dict], prefix: str) -> dict:
    recorded = percentiles([e["recorded"] - e["sent"] for e in entries if "recorded" in e])
    handled = percentiles([e["handled"] - e["sent"] for e in entries])
    return {f"{prefix}_recorded_p50_ms": recorded["p50"], f"{prefix}_recorded_p99_ms": recorded["p99"],
            f"{prefix}_handler_p50_ms": handled["p50"], f"{prefix}_handler_p99_ms": handled["p99"]}


def _start_and_wait(rig: WorkflowRig, ids: list[str], workflow_type: str, arg: object, event: bytes,
                    timeout_s: float) -> None:
    """Start the runs; wait until each wrote `event` once."""
    rig.events.poll(0.05)
    for workflow_id in ids:
        rig.send_start(workflow_id, workflow_type, arg)
    waiting = set(ids)
    deadline = time.monotonic() + timeout_s
    while waiting:
        for raw in rig.events.poll(0.02):
            if peek(raw)[1] == event:
                waiting.discard(codec.decode(raw, codec.AVRO_HEADERS).value["workflow_id"])
        if time.monotonic() > deadline:
            rig.check_alive()
            raise TimeoutError(f"{len(waiting)} runs did not reach {event.decode()} in {timeout_s} s")


def run_signals(bench: Bench, quick: bool, workers: int = 1, engines: int = 1, profile: str | None = None,
                profile_idle: bool = False, partitions: int = PARTITIONS) -> dict:
    single, saturated, window = (100, 2_000, 200) if quick else (300, 10_000, 200)
    out: dict = {"workflows": SINKS, "partitions": partitions, "window": window, "load1_at_start": loadavg()}
    rig = WorkflowRig(bench, partitions, workers, engines)
    try:
        sinks = [f"sink-{n}" for n in range(SINKS)]
        _start_and_wait(rig, sinks, "BenchSignalSink", 0, _TASK_COMPLETED, 120)
        tracker = SignalTracker(rig)
        for n in range(single):
            tracker.send(sinks[n % SINKS], f"one-{n}")
            tracker.wait_all(60)
        out.update(_latencies(tracker.done, "single"))
        tracker.done = []
        window = Window(rig)
        first = now_ms()
        sent = 0
        while sent < saturated or tracker.in_flight:
            while sent < saturated and tracker.in_flight < window:
                tracker.send(sinks[sent % SINKS], f"many-{sent}")
                sent += 1
            tracker.poll()
        seconds = (max(e["handled"] for e in tracker.done) - first) / 1000
        out.update({"signals": saturated, "signals_per_sec": round(saturated / seconds, 1),
                    **_latencies(tracker.done, "saturated"),
                    **cost(window.end(), seconds, saturated, "signal"),
                    "peak_rss_mb": rig.peak_rss()})
    finally:
        rig.close()
    return report("signals", out)


def run_queries(bench: Bench, quick: bool, workers: int = 1, engines: int = 1, profile: str | None = None,
                profile_idle: bool = False, partitions: int = PARTITIONS) -> dict:
    cached_n, uncached_n, long_runs, steps = (100, 20, 5, 200) if quick else (500, 100, 10, 200)
    out: dict = {"partitions": partitions, "history_events": steps * 5 + 6, "load1_at_start": loadavg()}
    rig = WorkflowRig(bench, partitions, workers, engines)
    try:
        sinks = [f"qsink-{n}" for n in range(20)]
        _start_and_wait(rig, sinks, "BenchSignalSink", 0, _TASK_COMPLETED, 120)
        longs = [f"long-{n}" for n in range(long_runs)]
        _start_and_wait(rig, longs, "BenchLongHistory", steps, _CLOSED, 600)
        for name, ids, count in (("cached", sinks, cached_n), ("uncached", longs, uncached_n)):
            times = []
            for n in range(count + 5):
                handle = rig.client.get_workflow_handle(ids[n % len(ids)])
                began = time.perf_counter()
                answer = handle.query("count")
                if n >= 5:  # the first ones warm the client's reply listener
                    times.append((time.perf_counter() - began) * 1000)
                assert answer == (0 if name == "cached" else steps), answer
            p = percentiles(times)
            out.update({f"{name}_p50_ms": p["p50"], f"{name}_p99_ms": p["p99"], f"{name}_queries": count})
    finally:
        rig.close()
    return report("queries", out)


def run_children(bench: Bench, quick: bool, workers: int = 1, engines: int = 1, profile: str | None = None,
                 profile_idle: bool = False, partitions: int = PARTITIONS) -> dict:
    parents, children, in_flight = (100, 2, 50) if quick else (500, 2, 100)
    out: dict = {"parents": parents, "children_each": children, "in_flight": in_flight, "partitions": partitions,
                 "load1_at_start": loadavg()}
    rig = WorkflowRig(bench, partitions, workers, engines)
    try:
        _parent_loop(rig, "warmup", 20, 10, children, 120)
        sent, seen, _ = _parent_loop(rig, "single", 20 if quick else 50, 1, children, 120)
        single = percentiles([seen[w] - sent[w] for w in sent])
        out.update(single_p50_ms=single["p50"], single_p99_ms=single["p99"])
        window = Window(rig)
        sent, seen, not_completed = _parent_loop(rig, "measured", parents, in_flight, children, 600)
        seconds = (max(seen.values()) - min(sent.values())) / 1000
        p = percentiles([seen[w] - sent[w] for w in sent])
        total = parents * (1 + children)
        out.update({"workflows_per_sec": round(total / seconds, 1), "parents_per_sec": round(parents / seconds, 1),
                    "p50_ms": p["p50"], "p99_ms": p["p99"], "not_completed": not_completed[:10],
                    **cost(window.end(), seconds, total),
                    "peak_rss_mb": rig.peak_rss()})
    finally:
        rig.close()
    return report("children", out)


def _parent_loop(rig: WorkflowRig, tag: str, count: int, in_flight: int, children: int,
                 timeout_s: float) -> tuple[dict, dict, list]:
    """Start `count` parents keeping `in_flight` open; (sent, seen) times by parent id."""
    sent: dict[str, float] = {}
    seen: dict[str, float] = {}
    not_completed: list[str] = []
    deadline = time.monotonic() + timeout_s
    while len(seen) < count:
        for _ in range(max(0, min(count - len(sent), in_flight - (len(sent) - len(seen))))):
            workflow_id = f"{tag}-{len(sent)}"
            sent[workflow_id] = now_ms()
            rig.send_start(workflow_id, "BenchParent", children)
        for raw in rig.events.poll(0.02):
            intent = peek(raw)[1]
            if intent.startswith(b"WORKFLOW_EXECUTION_") and intent in _PARENT_CLOSES:
                workflow_id = codec.decode(raw, codec.AVRO_HEADERS).value["workflow_id"]
                if workflow_id in sent and workflow_id not in seen:
                    seen[workflow_id] = now_ms()
                    if intent != _CLOSED:
                        not_completed.append(f"{workflow_id}: {intent.decode()}")
        if time.monotonic() > deadline:
            rig.check_alive()
            raise TimeoutError(f"{tag}: {len(seen)} of {count} parents closed in {timeout_s} s")
    return sent, seen, not_completed


_PARENT_CLOSES = {b"WORKFLOW_EXECUTION_COMPLETED", b"WORKFLOW_EXECUTION_FAILED", b"WORKFLOW_EXECUTION_TIMED_OUT",
                  b"WORKFLOW_EXECUTION_TERMINATED", b"WORKFLOW_EXECUTION_CANCELED"}
