"""Time from a broker restart to the engine's first committed transaction.

A single-node broker of the bench's own (port STREAMPROC_BENCH_FAULT_PORT, default
29150, data in the bench's work directory; the shared broker is never touched) serves
an engine process and a job worker while jobs are created at 50/s. The broker is
SIGKILLed, left down 10 s and started again, 10 times (--quick: 2). A read_committed
reader of the events topic sees the first event after each restart: the first
transaction the engine committed (nothing written while the broker was down can be
read; what the reader had fetched before the kill is drained first).

Reported per restart and as nearest-rank p50/p99 in ms:
- `from_launch_ms`: from launching the broker's JVM to that first event (the goal,
  <= 10 s, is about this one);
- `from_ready_ms`: from the broker answering metadata requests (what the engine can
  shorten) to that first event;
- `broker_start_ms`: the broker's own start, launch to first metadata answer.
"""

from __future__ import annotations

import os
import threading
import time
import uuid

from confluent_kafka import Consumer

from bench.common import Bench, loadavg, percentiles, say, wait_log
from streamproc.client import SyncClient
from streamproc.devenv.broker import LocalBroker
from streamproc.kafka.client_log import ClientLog
from streamproc.kafka.config import consumer_config

QUEUE = "bench-restarts"
DOWN_S = 10
JOBS_PER_S = 50


def run(bench: Bench, quick: bool) -> dict:
    restarts = 2 if quick else 10
    port = int(os.environ.get("STREAMPROC_BENCH_FAULT_PORT", "29150"))
    broker = LocalBroker(port=port, controller_port=port + 1, state_dir=bench.dir / "kafka-restarts",
                         heap=os.environ.get("STREAMPROC_BROKER_HEAP", "-Xms512m -Xmx512m"))
    bootstrap = broker.start()
    stop = threading.Event()
    creator = None
    tap = None
    try:
        env = bench.env(STREAMPROC_BOOTSTRAP=bootstrap, STREAMPROC_ENGINE_ID=f"restarts-{uuid.uuid4().hex[:6]}",
                        STREAMPROC_PARTITIONS="4", STREAMPROC_STATE_DIR=str(bench.dir / "state-restarts"))
        engine = bench.spawn(["engine", "run"], env, "engine-restarts.log")
        wait_log(engine, "partitions_assigned", 90)
        bench.spawn(["worker", "run", QUEUE, "--handler", "bench.handlers:noop", "--worker-id", "restarts"],
                    bench.env(STREAMPROC_BOOTSTRAP=bootstrap), "worker-restarts.log")
        creator = threading.Thread(target=_create_jobs, args=(bootstrap, bench.namespace, stop), daemon=True)
        creator.start()
        tap = Consumer(consumer_config(bootstrap, f"{bench.namespace}.bench-tap", **ClientLog("bench-tap").config(),
                                       **{"reconnect.backoff.max.ms": 1000, "auto.offset.reset": "latest"}))
        tap.subscribe([bench.topics.events])
        _first_event(tap, 60)  # flowing
        results = []
        for n in range(restarts):
            time.sleep(3)
            broker.kill()
            time.sleep(DOWN_S)
            while tap.poll(0.2) is not None:  # what was fetched before the kill
                pass
            launched = time.monotonic()
            broker.start()
            ready = time.monotonic()
            first = _first_event(tap, 120)
            results.append({"broker_start_ms": (ready - launched) * 1000, "from_ready_ms": (first - ready) * 1000,
                            "from_launch_ms": (first - launched) * 1000})
            say(f"restart {n + 1}/{restarts}: first commit {first - launched:.1f} s after launch, "
                f"{first - ready:.1f} s after the broker answered")
        out = {"restarts": restarts, "down_s": DOWN_S, "jobs_per_s": JOBS_PER_S, "load1_at_start": loadavg(),
               "engine_alive": engine.poll() is None}
        for key in ("from_launch_ms", "from_ready_ms", "broker_start_ms"):
            out[key] = percentiles([r[key] for r in results])
        out["per_restart_s"] = [round(r["from_launch_ms"] / 1000, 1) for r in results]
        return out
    finally:
        stop.set()
        if creator is not None:
            creator.join(30)
        if tap is not None:
            tap.close()
        for proc in bench.procs:  # before the broker goes: they leave cleanly
            proc.terminate()
        for proc in bench.procs:
            try:
                proc.wait(30)
            except Exception:  # noqa: BLE001 - Bench.close kills what is left
                pass
        broker.kill()


def _create_jobs(bootstrap: str, namespace: str, stop: threading.Event) -> None:
    with SyncClient(bootstrap, namespace) as client:
        n = 0
        while not stop.wait(1 / JOBS_PER_S):
            client.create_job(QUEUE, {"n": n})
            n += 1


def _first_event(tap: Consumer, timeout: float) -> float:
    """monotonic time the reader got its next committed record."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = tap.poll(0.05)
        if msg is not None and msg.error() is None:
            return time.monotonic()
    raise TimeoutError(f"no event within {timeout} s")
