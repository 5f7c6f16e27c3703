"""`kill -USR2 <engine pid>`: the engine logs its counters and goes on (what a benchmark reads
its committed transactions from)."""

from __future__ import annotations

import json
import signal
import time

from streamproc.client import SyncClient
from tests.support.engines import engine_process


def _stats_lines(engine) -> list[dict]:
    lines = [json.loads(line) for line in engine.log_text().splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("event") == "engine_stats"]


def _ask_stats(engine, timeout: float = 20) -> dict:
    before = len(_stats_lines(engine))
    engine.proc.send_signal(signal.SIGUSR2)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = _stats_lines(engine)
        if len(lines) > before:
            return lines[-1]
        assert engine.alive(), engine.log_text()[-3000:]
        time.sleep(0.05)
    raise TimeoutError(f"no engine_stats within {timeout} s:\n{engine.log_text()[-3000:]}")


def test_sigusr2_logs_the_transactions_committed_so_far(bootstrap, namespace, tmp_path):
    engine = engine_process(bootstrap, namespace, "stats-engine", tmp_path / "state", tmp_path, partitions=1).start()
    try:
        engine.wait_for_log("partitions_assigned", 90)
        first = _ask_stats(engine)
        assert set(first) >= {"transactions", "commands", "due_commands", "echoes"}
        with SyncClient(bootstrap, namespace) as client:
            for n in range(3):
                client.create_job("stats-queue", {"n": n})
            client.flush()
        deadline = time.monotonic() + 60
        later = _ask_stats(engine)
        while later["commands"] < first["commands"] + 3 and time.monotonic() < deadline:
            time.sleep(0.2)
            later = _ask_stats(engine)
        assert later["commands"] >= first["commands"] + 3
        assert later["transactions"] > first["transactions"]
        assert engine.alive()
    finally:
        engine.stop()
    assert engine.proc.returncode == 0
