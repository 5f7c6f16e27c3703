"""How much of the local broker's CPU goes to compiling Java, and warming it until little does.

A broker just started is a cold JVM. Measured on the 2-core machine (JFR's per-thread CPU
load), its two JIT compiler threads used about half of the broker's CPU in the first runs
after a start, and still a third after three runs of a minute; the broker's CPU per workflow
then fell by half once they were idle (15.9 -> 7.1-7.6 ms per checkpointed 10-step
workflow). On two shared cores that CPU is taken from the engine and the workers measured
beside it. A production broker runs for days and is warm, and the peers' servers (Rust, Go)
compile nothing at run time; so a comparison first warms the broker until its compiler is
nearly idle, and every line says how much of the broker's CPU went to compiling, so that a
reader can tell a warm run from a cold one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

#: HotSpot's compiler threads as /proc names them (a thread name is cut at 15 characters).
COMPILER_THREADS = ("C1 CompilerThre", "C2 CompilerThre")
#: Warm when one run's compiling is under this share of the broker's CPU in that run.
WARM_JIT_SHARE = 0.10
MAX_WARM_UP_RUNS = 12


def compiler_cpu_seconds(pid: int | None) -> float:
    """User + system CPU the live JIT compiler threads of the JVM `pid` have used so far (0
    for anything else: no pid, a remote broker, not a HotSpot JVM)."""
    return sum(compiler_threads_cpu(pid).values())


def compiler_threads_cpu(pid: int | None) -> dict[int, float]:
    """{thread id: CPU seconds so far} of the JVM `pid`'s live JIT compiler threads.

    HotSpot starts and stops compiler threads with the work (more so with C1 alone), so a
    span is measured thread by thread: a thread that ended within it loses its share."""
    if pid is None:
        return {}
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return {}
    found = {}
    for task in tasks:
        try:
            if (task / "comm").read_text().strip() not in COMPILER_THREADS:
                continue
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended between the listing and the read
            continue
        found[int(task.name)] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return found


@dataclass
class BrokerCpu:
    """The broker's CPU over a span, and the part of it its JIT compiler used."""

    pid: int | None
    total_s: float = 0.0
    jit_s: float = 0.0

    def __post_init__(self) -> None:
        self._total_at, self._jit_at = _process_cpu_seconds(self.pid), compiler_threads_cpu(self.pid)

    def read(self) -> BrokerCpu:
        """The span from creation until now (call once, before the broker stops)."""
        self.total_s = round(_process_cpu_seconds(self.pid) - self._total_at, 2)
        now = compiler_threads_cpu(self.pid)
        self.jit_s = round(sum(cpu - self._jit_at.get(tid, 0.0) for tid, cpu in now.items()), 2)
        return self

    @property
    def jit_share(self) -> float | None:
        return round(self.jit_s / self.total_s, 2) if self.total_s > 0 else None


def warm_up(run_once: Callable[[int], None], pid: int | None, say: Callable[[str], None],
            max_runs: int = MAX_WARM_UP_RUNS) -> list[dict]:
    """Call `run_once(i)` (an unmeasured run against the broker) until the broker's compiler
    used under WARM_JIT_SHARE of its CPU in one run, at most `max_runs` times.

    Returns each run's broker CPU and compiling share. A broker this process cannot see
    (remote, or not a JVM) gets one run, as nothing tells whether it is warm."""
    runs = []
    for i in range(max_runs):
        cpu = BrokerCpu(pid)
        run_once(i)
        cpu.read()
        runs.append({"broker_cpu_s": cpu.total_s, "broker_jit_cpu_s": cpu.jit_s, "jit_share": cpu.jit_share})
        say(f"warm-up run {i + 1}: broker CPU {cpu.total_s} s, of it compiling {cpu.jit_s} s")
        if pid is None or not compiler_threads_cpu(pid) or (cpu.jit_share or 0) < WARM_JIT_SHARE:
            break
    return runs


def warm_broker(bootstrap: str, pid: int | None, workflows: int = 1000, max_runs: int | None = None) -> list[dict]:
    """`warm_up` with runs of `bench/run.py workflows_1_activity` (remote activities: the
    most kinds of requests, transactions, consumer groups) against `bootstrap`."""
    run_py = Path(__file__).resolve().parent / "run.py"

    def run_once(_: int) -> None:
        done = subprocess.run([sys.executable, str(run_py), "workflows_1_activity", "--workflows", str(workflows)],
                              env={**os.environ, "STREAMPROC_BOOTSTRAP": bootstrap}, stdout=subprocess.DEVNULL,
                              timeout=900)
        if done.returncode != 0:
            raise RuntimeError(f"the warm-up run failed (exit {done.returncode})")

    return warm_up(run_once, pid, lambda text: print(f"[bench] {text}", file=sys.stderr, flush=True),
                   max_runs or MAX_WARM_UP_RUNS)


def _process_cpu_seconds(pid: int | None) -> float:
    from bench.common import pid_cpu_seconds  # bench/common.py imports the project; keep this module light

    return pid_cpu_seconds(pid)
