"""What the workflow benchmarks share: an engine, worker processes, a START sender, a closed loop.

The bench sends START commands itself (the Python client's `start_workflow` waits for
each STARTED reply; a benchmark keeping 100 runs in flight must not), to the partition
of the workflow id, and reads the events topic (read_committed) for the runs' history
events. Workers are child processes running the combined `Worker`
(`bench.workflow_worker_main`) for the workflows of `bench.workflow_definitions`.

Times: `sent` is the bench's clock when it handed START to its producer; `seen` is when
the bench read the run's close event; `event_time_ms` are the engine's clock when it
processed the command that appended the event. All three are this machine's wall clock.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

from bench.activity_common import Reader
from bench.broker_requests import broker_counts, counts_since, per_unit
from bench.common import (
    REPO,
    Bench,
    cpu_seconds,
    engine_counters,
    now_ms,
    peak_rss_mb,
    peek,
    percentiles,
    pid_cpu_seconds,
    say,
    stop,
    wait_group_stable,
    wait_log,
    worker_stats,
)
from bench.workflow_profile import Profiler
from streamproc.activity.payloads import encode_args
from streamproc.client import SyncClient
from streamproc.client.workflow_events import CLOSE_EVENTS
from streamproc.kafka.admin import TopicAdmin
from streamproc.protocol import codec
from streamproc.protocol.partitioning import partition_for
from streamproc.protocol.records import Record, ValueType, WorkflowIntent
from streamproc.settings import DEFAULT_PARTITIONS

QUEUE = "bench-workflows"
#: Partitions of the engine's topics and the task queues unless --partitions: the engine's default.
PARTITIONS = DEFAULT_PARTITIONS
_CLOSES = {name.encode() for name in CLOSE_EVENTS}
_COMPLETED = b"WORKFLOW_EXECUTION_COMPLETED"


def start_value(workflow_id: str, workflow_type: str, arg: object, queue: str = QUEUE) -> dict:
    return {"workflow_id": workflow_id, "workflow_type": workflow_type, "task_queue": queue,
            "input": encode_args([arg]), "workflow_execution_timeout_ms": 0, "workflow_run_timeout_ms": 0,
            "workflow_task_timeout_ms": 0, "retry_policy": None, "id_reuse_policy": "",
            "id_conflict_policy": "", "identity": "bench"}


class WorkflowRig:
    """`engines` engine processes sharing `partitions`, `workers` worker processes on QUEUE,
    a client and an events reader."""

    def __init__(self, bench: Bench, partitions: int = PARTITIONS, workers: int = 1, engines: int = 1) -> None:
        self.bench = bench
        self.partitions = partitions
        run = uuid.uuid4().hex[:6]
        self.engines = [bench.engine(f"workflows-{run}-{n}", partitions) for n in range(engines)]
        self.engine = self.engines[0]
        self.workers: list[subprocess.Popen] = []
        topics = bench.topics
        wait_log(self.engine, "partitions_assigned", 90)
        wait_group_stable(bench, topics.engine_group, engines, partitions, 90)
        # Topics first, so that every worker joins groups of topics that exist.
        TopicAdmin(bench.bootstrap, topics).ensure({topics.workflow_tasks(QUEUE): (partitions, {}),
                                                    topics.tasks(QUEUE): (partitions, {})})
        for n in range(workers):
            self.workers.append(self._spawn_worker(f"worker-{n}"))
        for group in (topics.workflow_worker_group(QUEUE), topics.worker_group(QUEUE)):
            wait_group_stable(bench, group, workers, partitions, 90)
        self.client = SyncClient(bench.bootstrap, bench.namespace)
        self.events = Reader(bench, topics.events, list(range(partitions)), from_end=True)

    def _spawn_worker(self, name: str) -> subprocess.Popen:
        log_path = self.bench.dir / f"{name}.log"
        with open(log_path, "ab") as out:
            proc = subprocess.Popen([sys.executable, "-m", "bench.workflow_worker_main", QUEUE],
                                    env=self.bench.env(), cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
        proc.log_path = log_path
        self.bench.procs.append(proc)
        return proc

    def send_start(self, workflow_id: str, workflow_type: str, arg: object) -> None:
        # A reply partition is not asked for: the run's events tell everything.
        self.client.send(Record.command(ValueType.WORKFLOW, WorkflowIntent.START,
                                        start_value(workflow_id, workflow_type, arg), request_id=workflow_id),
                         partition_for(workflow_id, self.partitions))

    def cpu(self) -> dict[str, float]:
        """CPU seconds so far by role: engines, workers, the local broker (0 for a remote one)
        and the client (this process: the bench's producer, readers and loop)."""
        return {"engine": sum(cpu_seconds(e) for e in self.engines),
                "workers": sum(cpu_seconds(w) for w in self.workers),
                "broker": pid_cpu_seconds(self.bench.broker_pid),
                "client": time.process_time()}

    def engine_totals(self) -> dict[str, int]:
        """Transactions the engines committed and commands they processed so far."""
        counters = [engine_counters(e) for e in self.engines]
        return {name: sum(c.get(name, 0) for c in counters) for name in ("transactions", "commands")}

    def ride_along(self) -> dict[str, int]:
        """The workers' ride-along counts so far, summed: answers sent with an activity's
        completion, accepted, refused, and completions without one by reason (`skipped.<reason>`)."""
        total: dict[str, int] = {}
        for proc in self.workers:
            stats = worker_stats(proc)
            for name, key in (("sent", "ride_along_sent"), ("accepted", "rode_along"),
                              ("refused", "ride_along_refused"), ("handed_back", "handed_back")):
                total[name] = total.get(name, 0) + stats.get(key, 0)
            for reason, n in (stats.get("ride_along_skipped") or {}).items():
                total[f"skipped.{reason}"] = total.get(f"skipped.{reason}", 0) + n
        return total

    def check_alive(self) -> None:
        for proc in [*self.engines, *self.workers]:
            if proc.poll() is not None:
                raise RuntimeError(f"{proc.args} exited {proc.returncode}: {proc.log_path.read_text()[-3000:]}")

    def peak_rss(self) -> dict:
        return {"engines": [peak_rss_mb(e) for e in self.engines],
                "workers": [peak_rss_mb(w) for w in self.workers]}

    def close(self) -> None:
        self.events.close()
        self.client.close()
        for proc in [*self.workers, *self.engines]:
            stop(proc)


def closed_loop(rig: WorkflowRig, tag: str, count: int, in_flight: int, workflow_type: str, arg: object,
                timeout_s: float) -> dict:
    """Start `count` runs keeping `in_flight` open (one more each time one closes); wait for all.

    Returns sent / seen times by workflow id, the closes that were not completions, the
    decoded workflow events of the runs, CPU used and the wall time from first send to
    last close seen.
    """
    events = rig.events
    events.poll(0.05)
    events.forget()
    window = Window(rig)
    sent: dict[str, float] = {}
    seen: dict[str, float] = {}
    not_completed: list[str] = []
    deadline = time.monotonic() + timeout_s
    first_send = now_ms()
    while len(seen) < count:
        room = min(count - len(sent), in_flight - (len(sent) - len(seen)))
        for _ in range(max(0, room)):
            workflow_id = f"{tag}-{len(sent)}"
            sent[workflow_id] = now_ms()
            rig.send_start(workflow_id, workflow_type, arg)
        for value in events.poll(0.02):
            intent = peek(value)[1]
            if intent in _CLOSES:
                received = now_ms()
                record = codec.decode(value, codec.AVRO_HEADERS)
                seen[record.value["workflow_id"]] = received
                if intent != _COMPLETED:
                    not_completed.append(f"{record.value['workflow_id']}: {intent.decode()}")
        if time.monotonic() > deadline:
            rig.check_alive()
            raise TimeoutError(f"{tag}: {len(seen)} of {count} closed in {timeout_s} s; {events.summary()}")
    seconds = (max(seen.values()) - first_send) / 1000
    spent = window.end()
    runs = events_by_run(events.decode())
    return {"sent": sent, "seen": seen, "not_completed": not_completed, "runs": runs, "seconds": seconds,
            **spent, "counts": events.summary()}


def measured_loop(rig: WorkflowRig, out: dict, profile: str | None, profile_idle: bool, count: int,
                  in_flight: int, workflow_type: str, arg: object, timeout_s: float) -> dict:
    """`closed_loop` of the measured runs, under py-spy when `profile` names a file prefix
    (the files written go to out["profiled"])."""
    profiler = Profiler(profile, rig, profile_idle) if profile else None
    try:
        return closed_loop(rig, "measured", count, in_flight, workflow_type, arg, timeout_s)
    finally:
        if profiler is not None:
            out["profiled"] = profiler.stop()


def warm_and_measure(rig: WorkflowRig, out: dict, profile: str | None, profile_idle: bool, workflow_type: str,
                     arg: object, in_flight: int, count: int, warmup: int, timeout_s: float,
                     stages: list[str]) -> dict:
    """A warm-up of `warmup` runs (not measured: topic metadata, transactions' partitions, the
    workers' imports and caches), then `measured_loop`; what every workflow scenario reports
    of it goes into `out`: client latencies (p50_ms / p99_ms), `stages`, cost, the runs not
    completed. Returns the measured loop for the scenario's own figures."""
    if warmup:
        closed_loop(rig, "warmup", warmup, in_flight, workflow_type, arg, 120)
    loop = measured_loop(rig, out, profile, profile_idle, count, in_flight, workflow_type, arg, timeout_s)
    lat = latencies(loop)
    out.update({
        "p50_ms": lat["client_seen"]["p50"], "p99_ms": lat["client_seen"]["p99"],
        "latency_ms": lat,
        "stages_ms": stage_breakdown(loop, stages),
        **cost(loop, loop["seconds"], count),
        "not_completed": loop["not_completed"][:10],
    })
    return loop


def events_by_run(records: list[Record]) -> dict[str, list[dict]]:
    """History events by workflow id, in event id order, as dicts: event_type, event_id,
    event_time_ms (engine time), attributes, log_time_ms (the record's Kafka timestamp)."""
    out: dict[str, list[dict]] = {}
    for r in records:
        if r.record_type.name != "EVENT" or r.value_type != ValueType.WORKFLOW:
            continue
        out.setdefault(r.value["workflow_id"], []).append(
            {"event_type": r.intent, "event_id": r.value["event_id"], "event_time_ms": r.value["event_time_ms"],
             "attributes": r.value.get("attributes"), "log_time_ms": r.timestamp_ms})
    for history in out.values():
        history.sort(key=lambda e: e["event_id"])
    return out


def stage_breakdown(loop: dict, stages: list[str]) -> dict:
    """Percentiles of the time between consecutive stages of each run.

    A stage is "sent" (the bench's START), an event type (its first occurrence in the
    run's history after the previous stage's event; engine time), or "seen" (the bench
    read the close event).
    """
    gaps: dict[str, list[float]] = {f"{a}->{b}": [] for a, b in zip(stages, stages[1:])}
    for workflow_id in loop["seen"]:
        times = _stage_times(loop, workflow_id, stages)
        for (a, b), (ta, tb) in zip(zip(stages, stages[1:]), zip(times, times[1:])):
            if ta is not None and tb is not None:
                gaps[f"{a}->{b}"].append(tb - ta)
    return {name: percentiles(values) for name, values in gaps.items()}


def _stage_times(loop: dict, workflow_id: str, stages: list[str]) -> list[float | None]:
    history = loop["runs"].get(workflow_id, [])
    position = 0
    out: list[float | None] = []
    for stage in stages:
        if stage in ("sent", "seen"):
            out.append(loop[stage].get(workflow_id))
            continue
        found = next((i for i in range(position, len(history)) if history[i]["event_type"] == stage), None)
        out.append(None if found is None else history[found]["event_time_ms"])
        position = position if found is None else found + 1
    return out


def latencies(loop: dict) -> dict:
    """SyncClient START sent -> client read the close event, and -> the engine wrote it."""
    sent, seen = loop["sent"], loop["seen"]
    closed_at = {w: h[-1]["event_time_ms"] for w, h in loop["runs"].items() if h}
    return {"client_seen": percentiles([seen[w] - sent[w] for w in seen]),
            "close_event_time": percentiles([closed_at[w] - sent[w] for w in seen if w in closed_at])}


class Window:
    """CPU seconds by role, transactions the engines committed and commands they processed,
    and the workers' ride-along counts, from its creation to `end()`.

    The transactions are the engines' own count (each logs it when sent SIGUSR2), asked just
    before the CPU is read at the start and just after at the end; the workers' counts
    likewise (`bench.workflow_worker_main`)."""

    def __init__(self, rig: WorkflowRig) -> None:
        self.rig = rig
        self._ride_along = rig.ride_along()
        self._totals = rig.engine_totals()
        bench = rig.bench
        # The broker's meters (--broker-requests) are read outside the CPU window: before it
        # starts, after it ends.
        self._meters = broker_counts(bench.broker_pid) if bench.broker_requests else None
        self._cpu = rig.cpu()

    def end(self) -> dict:
        cpu = self.rig.cpu()
        totals = self.rig.engine_totals()
        ride_along = self.rig.ride_along()
        spent = {"cpu": {role: cpu[role] - self._cpu[role] for role in cpu},
                 "transactions": totals["transactions"] - self._totals["transactions"],
                 "commands": totals["commands"] - self._totals["commands"],
                 "ride_along": {name: n - self._ride_along.get(name, 0) for name, n in sorted(ride_along.items())
                                if n - self._ride_along.get(name, 0)}}
        if self._meters is not None:
            bench = self.rig.bench
            spent["broker"] = counts_since(self._meters, broker_counts(bench.broker_pid), bench.namespace)
        return spent


def cost(spent: dict, seconds: float, count: int, unit: str = "workflow") -> dict:
    """Where a measurement's cost went (`spent` from `Window.end`, over `seconds`, for `count`
    units of work): CPU seconds by role (engine, workers, broker, client) and per unit, and the
    engines' committed transactions, per second and per unit."""
    cpu, transactions = spent["cpu"], spent["transactions"]
    out = {"cpu_seconds_by_role": {role: round(s, 2) for role, s in cpu.items()},
           f"cpu_ms_per_{unit}": {role: round(s * 1000 / count, 3) for role, s in cpu.items()},
           "transactions": transactions,
           "transactions_per_sec": round(transactions / seconds, 1),
           f"transactions_per_{unit}": round(transactions / count, 2)}
    if "commands" in spent:
        out[f"commands_per_{unit}"] = round(spent["commands"] / count, 2)
    if spent.get("ride_along"):
        out["ride_along"] = ride_along_summary(spent["ride_along"])
    if "broker" in spent:  # --broker-requests
        counted = per_unit(spent["broker"], count, transactions, unit)
        out[f"broker_requests_per_{unit}"] = counted["requests"]
        out[f"broker_fetches_expired_empty_per_{unit}"] = counted["fetches_expired_empty"]
    return out


def ride_along_summary(counts: dict[str, int]) -> dict:
    """The workers' ride-along counts over a window, with the share of activity completions
    that carried their run's next task's answer and the engine accepted."""
    skipped = {name.removeprefix("skipped."): n for name, n in counts.items() if name.startswith("skipped.")}
    completions = counts.get("sent", 0) + sum(skipped.values())
    return {"sent": counts.get("sent", 0), "accepted": counts.get("accepted", 0),
            "refused": counts.get("refused", 0), "skipped": skipped, "handed_back": counts.get("handed_back", 0),
            "accepted_share": round(counts.get("accepted", 0) / completions, 3) if completions else None}


def sized(count: int, warmup: int, workflows: int | None, warmup_workflows: int | None) -> tuple[int, int]:
    """(measured, warm-up) runs: the scenario's own unless --workflows / --warmup say otherwise;
    --workflows alone keeps the warm-up no longer than the measurement."""
    if workflows is not None:
        count = workflows
        warmup = min(warmup, workflows)
    if warmup_workflows is not None:
        warmup = warmup_workflows
    return count, warmup


def report(tag: str, result: dict) -> dict:
    say(tag, result)
    return result
