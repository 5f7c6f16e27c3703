"""Crash and takeover: SIGKILL engines under load; nothing lost, nothing done twice.

Invariants checked on the events topic as a read_committed reader sees it:
every job created once and completed exactly once, no event written twice, no
rejection other than the ones a crash may legitimately cause, and the state left in
RocksDB matches the events (no open job, no due date left behind).
"""

from __future__ import annotations

import collections
import json
import random
import shutil
import threading
import time

import pytest

from streamproc.client import Client
from streamproc.state.db import PartitionDb
from streamproc.state.families import Family
from tests.support.engines import engine_process, worker_process
from tests.support.history import EventLog, assert_jobs_completed_once

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _produce_jobs(bootstrap, namespace, count, per_second, done: threading.Event) -> None:
    with Client(bootstrap, namespace) as client:
        for i in range(count):
            client.create_job("flow", {"n": i}, request_id=f"job-{i}")
            if i % 50 == 49:
                client.flush()
                time.sleep(50 / per_second)
    done.set()


def _check_exactly_once(events: EventLog, count: int) -> None:
    assert_jobs_completed_once(events, count)
    # Jobs here have a 5-minute timeout: no answer (COMPLETE, FAIL) may have been refused.
    # A START may: a task whose START was in flight when a rebalance moved its partition
    # is redelivered to the new owner, whose START the engine refuses (the job is started,
    # or done already), so its handler runs once.
    redelivered = ("it is STARTED, not ACTIVATABLE", "no such job was found")
    refused = [r for r in events.rejections()
               if not (r.intent == "START" and any(reason in r.rejection_reason for reason in redelivered))]
    assert refused == [], [r.rejection_reason for r in refused[:5]]


def _assert_no_open_state(state_dir) -> None:
    for path in sorted(state_dir.glob("*/partition-*")):
        db = PartitionDb(path, int(path.name.split("-")[1]))
        try:
            open_jobs = db.count(Family.JOBS)
            deadlines = db.count(Family.JOB_DEADLINES)
            # every pushed job ended, so every credit a stream gave came back
            held = {key: json.loads(doc)["in_use"] for key, doc in db.scan(Family.JOB_STREAMS)}
        finally:
            db.close()
        assert (open_jobs, deadlines) == (0, 0), f"{path.name}: {open_jobs} jobs, {deadlines} deadlines left"
        assert all(n == 0 for n in held.values()), f"{path.name}: streams still holding jobs: {held}"


def _logged_partitions(process, event: str, field: str) -> set[int]:
    """Partitions named by the first `event` log lines of a process, up to its shutdown."""
    found: set[int] = set()
    for line in process.log_text().splitlines():
        if f'"event": "{event}"' in line:
            found.update(json.loads(line)[field])
            if found:
                return found
    return found


#: The engine's options: its defaults, and a commit window (batches collect commands for 10 ms).
ENGINE_MODES = pytest.mark.parametrize("options", [(), ("--commit-interval-ms", "10")], ids=["default", "window"])


@pytest.mark.parametrize("options,worker_options", [((), ()), (("--commit-interval-ms", "10"), ()), ((), ("--push",))],
                         ids=["default", "window", "push"])
def test_sigkill_the_engine_repeatedly_while_5000_jobs_flow(bootstrap, namespace, tmp_path, options, worker_options):
    """With `--push` workers, most jobs are started in their CREATE's transaction and pushed to
    a worker's replies partition: a push of an aborted batch is never seen (read_committed),
    and the batch processed again may push to the other worker."""
    rng = random.Random(20261122)
    state = tmp_path / "state"
    engine = engine_process(bootstrap, namespace, "crashy", state, tmp_path, options=options).start()
    workers = [worker_process(bootstrap, namespace, "flow", f"w{i}", tmp_path, options=worker_options).start()
               for i in (1, 2)]
    events = EventLog(bootstrap, namespace)
    kills = 0
    try:
        engine.wait_for_log("partitions_assigned")
        done = threading.Event()
        producer = threading.Thread(target=_produce_jobs, args=(bootstrap, namespace, 5000, 400, done))
        producer.start()
        while kills < 6:
            time.sleep(rng.uniform(0.5, 2.5))
            engine.kill()
            kills += 1
            mark = len(engine.log_text())
            engine.start()
            engine.wait_for_log("partitions_assigned", since=mark)
        producer.join()
        events.read_until(lambda e: e.count("COMPLETED") >= 5000, timeout=180)
        time.sleep(2)
        events.read_until(lambda e: True, timeout=1)
        _check_exactly_once(events, 5000)
        restores = engine.log_text().count("partition_restored")
        assert restores >= 4 * (kills + 1)
        if worker_options:
            # the jobs really went the push way (not all through the topic)
            assert events.pushed_jobs() > 2500, events.pushed_jobs()
    finally:
        events.close()
        for p in (engine, *workers):
            p.stop()
    _assert_no_open_state(state)


def test_a_second_engine_takes_over_from_the_changelog_alone(bootstrap, namespace, tmp_path):
    state_a, state_b = tmp_path / "a", tmp_path / "b"
    a = engine_process(bootstrap, namespace, "engine-a", state_a, tmp_path).start()
    a.wait_for_log("partitions_assigned")
    b = engine_process(bootstrap, namespace, "engine-b", state_b, tmp_path).start()
    events = EventLog(bootstrap, namespace)
    workers = []
    try:
        b.wait_for_log("partitions_assigned")
        # both own partitions now; create jobs and let them wait (no worker yet)
        with Client(bootstrap, namespace) as client:
            for i in range(2000):
                client.create_job("flow", {"n": i}, request_id=f"job-{i}")
        events.read_until(lambda e: e.count("CREATED") >= 2000, timeout=60)
        owners = collections.Counter(e.partition_id for e in events.events(intent="CREATED"))
        assert len(owners) == 4

        a.kill()
        shutil.rmtree(state_a)                    # its disk is gone with it
        mark = len(b.log_text())
        workers = [worker_process(bootstrap, namespace, "flow", f"w{i}", tmp_path).start() for i in (1, 2)]
        events.read_until(lambda e: e.count("COMPLETED") >= 2000, timeout=180)
        time.sleep(2)
        events.read_until(lambda e: True, timeout=1)
        _check_exactly_once(events, 2000)
        took_over = [line for line in b.log_text()[mark:].splitlines() if "partition_restored" in line]
        assert took_over and any('"records": 0' not in line for line in took_over), took_over
    finally:
        events.close()
        for p in (a, b, *workers):
            p.stop()
    _assert_no_open_state(state_b)


@ENGINE_MODES
def test_a_second_engine_joining_mid_flow_takes_partitions_over_cleanly(bootstrap, namespace, tmp_path, options):
    a = engine_process(bootstrap, namespace, "join-a", tmp_path / "a", tmp_path, options=options).start()
    workers = [worker_process(bootstrap, namespace, "flow", f"w{i}", tmp_path).start() for i in (1, 2)]
    events = EventLog(bootstrap, namespace)
    b = None
    try:
        a.wait_for_log("partitions_assigned")
        done = threading.Event()
        producer = threading.Thread(target=_produce_jobs, args=(bootstrap, namespace, 3000, 500, done))
        producer.start()
        time.sleep(1.5)
        b = engine_process(bootstrap, namespace, "join-b", tmp_path / "b", tmp_path, options=options).start()
        b.wait_for_log("partitions_assigned")
        producer.join()
        events.read_until(lambda e: e.count("COMPLETED") >= 3000, timeout=120)
        time.sleep(1)
        events.read_until(lambda e: True, timeout=1)
        _check_exactly_once(events, 3000)
        # A that was busy rewinding when B joined (a slow broker) learns of its loss at its
        # next poll: wait for its word before comparing.
        a.wait_for_log("partitions_revoked", timeout=60)
        revoked_from_a = _logged_partitions(a, "partitions_revoked", "revoked")
        assigned_to_b = _logged_partitions(b, "partitions_assigned", "assigned")
        assert assigned_to_b and assigned_to_b <= revoked_from_a   # A handed over what B took
    finally:
        events.close()
        for p in (a, b, *workers):
            if p is not None:
                p.stop()
