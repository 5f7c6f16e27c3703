"""bench/broker_jit.py: the broker's compiling CPU is read from its JVM's compiler threads,
and a warm-up stops at the first run in which compiling was a small share of the broker's CPU."""

from __future__ import annotations

import os

import bench.broker_jit as broker_jit
from bench.broker_jit import compiler_cpu_seconds, warm_up
from bench.common import listener_pid


def test_a_process_with_no_jit_compiler_threads_compiled_nothing():
    assert compiler_cpu_seconds(os.getpid()) == 0.0
    assert compiler_cpu_seconds(None) == 0.0


def test_the_local_broker_has_spent_cpu_compiling(bootstrap):
    # Started for the test session, it has compiled at least the code that served its first requests.
    pid = listener_pid(int(bootstrap.rsplit(":", 1)[1]))
    assert pid is not None
    assert compiler_cpu_seconds(pid) > 0


def test_warm_up_runs_until_compiling_is_a_small_share_of_the_broker_cpu(monkeypatch):
    # Each run: (broker CPU, of it compiling); warm from the third run on.
    spans = iter([(10.0, 5.0), (10.0, 2.0), (10.0, 0.5), (10.0, 0.1)])
    clock = {"total": 0.0, "jit": 1.0}
    monkeypatch.setattr(broker_jit, "_process_cpu_seconds", lambda pid: clock["total"])
    monkeypatch.setattr(broker_jit, "compiler_threads_cpu", lambda pid: {7: clock["jit"]})

    def run_once(_: int) -> None:
        total, jit = next(spans)
        clock["total"] += total
        clock["jit"] += jit

    said = []
    runs = warm_up(run_once, 4242, said.append)
    assert [r["jit_share"] for r in runs] == [0.5, 0.2, 0.05]
    assert len(said) == 3 and "compiling 0.5 s" in said[-1]


def test_a_compiler_thread_that_ends_within_a_span_never_makes_it_negative(monkeypatch):
    threads = {7: 3.0, 8: 1.0}
    monkeypatch.setattr(broker_jit, "_process_cpu_seconds", lambda pid: 0.0)
    monkeypatch.setattr(broker_jit, "compiler_threads_cpu", lambda pid: dict(threads))
    cpu = broker_jit.BrokerCpu(4242)
    threads.pop(7)  # HotSpot stopped an idle compiler thread
    threads[8], threads[9] = 1.5, 0.25  # and started another
    assert cpu.read().jit_s == 0.75


def test_a_broker_that_is_not_a_visible_jvm_gets_one_run():
    calls = []
    runs = warm_up(calls.append, None, lambda _: None)
    assert calls == [0] and len(runs) == 1
