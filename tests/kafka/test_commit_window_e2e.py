"""The engine's commit window on a real broker: commands arriving within the interval of the
last transaction's begin share one transaction, and jobs still complete exactly once."""

from __future__ import annotations

import collections
import threading
import time

import pytest

from streamproc.client import Client
from streamproc.worker.job_worker import JobWorker
from tests.support.engines import EngineThread
from tests.support.history import EventLog

pytestmark = pytest.mark.kafka


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.01)


def test_commands_arriving_within_the_interval_share_one_transaction(bootstrap, namespace, tmp_path):
    events = EventLog(bootstrap, namespace)
    # 2 s: far more than the test needs to send five commands, however busy the machine.
    with EngineThread.on(bootstrap, namespace, tmp_path, "window", partitions=2, commit_interval_ms=2000) as engine, \
            Client(bootstrap, namespace) as client:
        client.create_job("window", {"n": 0})
        client.flush()
        _wait(lambda: engine.stats.commands == 1, 60, "the first CREATE committed")
        committed = engine.stats.batches
        began = time.monotonic()
        for n in range(1, 6):  # on both partitions, 20 ms apart
            client.create_job("window", {"n": n})
            client.flush()
            time.sleep(0.02)
        _wait(lambda: engine.stats.commands == 6, 60, "the five CREATEs committed")
        assert time.monotonic() - began < 2.5  # no later than the interval allows
        assert engine.stats.batches == committed + 1
    events.read_until(lambda e: e.count("CREATED") >= 6, timeout=30)
    assert events.duplicates() == [] and events.rejections() == []
    events.close()


def test_jobs_complete_once_through_a_commit_window(bootstrap, namespace, tmp_path):
    events = EventLog(bootstrap, namespace)
    worker = JobWorker("windowed", lambda job: job.payload["n"], bootstrap=bootstrap, namespace=namespace,
                       worker_id="windowed")
    thread = threading.Thread(target=worker.run, daemon=True)
    try:
        with EngineThread.on(bootstrap, namespace, tmp_path, "windowed", partitions=2, commit_interval_ms=20) as engine, \
                Client(bootstrap, namespace) as client:
            thread.start()
            assert worker.ready.wait(60)
            committed, began = engine.stats.batches, time.monotonic()
            for n in range(200):  # a steady flow: 200 jobs/s
                client.create_job("windowed", {"n": n})
                time.sleep(0.005)
            client.flush()
            _wait(lambda: engine.stats.commands == 600, 120, "three commands a job committed")
            seconds = time.monotonic() - began
            events.read_until(lambda e: e.count("COMPLETED") >= 200, timeout=120)
            time.sleep(0.5)
            events.read_available()
            completed = collections.Counter(e.key for e in events.events(intent="COMPLETED"))
            keys = {e.key for e in events.events(intent="CREATED")}
            assert len(keys) == 200 and set(completed) == keys and set(completed.values()) == {1}
            # at most one transaction per 20 ms (the first after a quiet spell at once)
            assert engine.stats.batches - committed <= seconds / 0.02 + 2
            assert events.duplicates() == [] and events.rejections() == []
    finally:
        worker.stop()
        thread.join(30)
        events.close()
