"""One healthy and one bad worker on a queue, for jobs and for activities: the bad one is
SIGKILLed mid-batch, or hangs in its handler forever. Every job and activity completes,
on the healthy worker, within its timeout plus backoff plus a few seconds; none is left
CREATED or SCHEDULED; no handler runs twice for one attempt.

Each worker process writes `id attempt worker` to a shared file when a handler starts
(tests/support/handlers.py, worker_activities.py), which is how "ran twice" is checked.
"""

from __future__ import annotations

import collections
import time
from datetime import timedelta

import pytest

from streamproc.activity import RetryPolicy
from streamproc.client import ActivityClient, Client
from tests.support.engines import combined_worker_process, engine_process, worker_process
from tests.support.history import EventLog
from tests.support.polling import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

QUEUE = "chores"
#: Job timeout / activity start-to-close timeout: how long a stuck attempt holds its job.
TIMEOUT_S = 3
#: What "a few seconds" may add: the rebalance that moves a partition (the session
#: timeout of a killed worker is 6 s), a START round trip, the engine's commit.
GRACE_S = 15


def _runs(path) -> list[tuple[str, int, str]]:
    if not path.exists():
        return []
    return [(i, int(a), w) for i, a, w in (line.split() for line in path.read_text().splitlines())]


def _start_rig(tmp_path, bootstrap, namespace, good, bad):
    """The engine, then the healthy and the bad worker, each owning some task partitions."""
    engine = engine_process(bootstrap, namespace, "faults", tmp_path / "state", tmp_path).start()
    engine.wait_for_log("partitions_assigned")
    workers = [good().start(), bad().start()]
    for w in workers:
        w.wait_for_log("tasks_assigned")
    time.sleep(3)  # the second member's cooperative rebalance: both own partitions now
    return engine, workers


def _job_worker(bootstrap, namespace, tmp_path, name, handler, runs, push=False):
    return lambda: worker_process(bootstrap, namespace, QUEUE, name, tmp_path, handler=f"tests.support.handlers:{handler}",
                                  options=("--max-concurrent", "4", *(("--push",) if push else ())),
                                  STREAMPROC_TEST_RUNS=str(runs), STREAMPROC_TEST_WORKER=name)


def _activity_worker(bootstrap, namespace, tmp_path, name, function, runs):
    return lambda: combined_worker_process(bootstrap, namespace, QUEUE, name, tmp_path,
                                           activities=[f"tests.support.worker_activities:{function}"],
                                           STREAMPROC_TEST_RUNS=str(runs), STREAMPROC_TEST_WORKER=name)


def _let_the_bad_worker_run(runs, bad, kill_after_runs: int | None) -> None:
    """Wait until the bad worker ran something; with `kill_after_runs`, SIGKILL it once it ran that many."""
    wait_until(lambda: any(w == "bad" for _, _, w in _runs(runs)), 20, "the bad worker ran nothing")
    if kill_after_runs is not None:
        wait_until(lambda: sum(w == "bad" for _, _, w in _runs(runs)) >= kill_after_runs, 20,
                   "the bad worker ran too little")
        bad.kill()


def _run_jobs(bootstrap, namespace, tmp_path, bad_handler, count, kill_after_runs=None, push=False):
    runs = tmp_path / "runs.txt"
    engine, (good, bad) = _start_rig(
        tmp_path, bootstrap, namespace,
        _job_worker(bootstrap, namespace, tmp_path, "good", "recorded_double", runs, push),
        _job_worker(bootstrap, namespace, tmp_path, "bad", bad_handler, runs, push))
    events = EventLog(bootstrap, namespace)
    try:
        with Client(bootstrap, namespace) as client:
            for i in range(count):
                client.create_job(QUEUE, {"n": i}, retries=3, timeout=timedelta(seconds=TIMEOUT_S),
                                  request_id=f"job-{i}")
        created_at = time.monotonic()
        _let_the_bad_worker_run(runs, bad, kill_after_runs)
        events.read_until(lambda e: e.count("COMPLETED") >= count, timeout=TIMEOUT_S + GRACE_S + 10)
        took = time.monotonic() - created_at
        time.sleep(1)
        events.read_available()
        created = {e.key for e in events.events(intent="CREATED")}
        completed = collections.Counter(e.key for e in events.events(intent="COMPLETED"))
        assert len(created) == count and set(completed) == created, "a job never completed"
        assert set(completed.values()) == {1}, "a job completed twice"
        attempts = collections.Counter((key, attempt) for key, attempt, _ in _runs(runs))
        assert max(attempts.values()) == 1, f"handlers ran twice: {[a for a, n in attempts.items() if n > 1]}"
        return took, _runs(runs), bad
    finally:
        events.close()
        for p in (engine, good, bad):
            p.stop()


JOB_WORKER_MODES = pytest.mark.parametrize("push", [False, True], ids=["topic", "push"])


@JOB_WORKER_MODES
def test_jobs_of_a_worker_killed_mid_batch_complete_on_the_healthy_one(bootstrap, namespace, tmp_path, push):
    took, runs, _ = _run_jobs(bootstrap, namespace, tmp_path, "recorded_slow_double", 40, kill_after_runs=3, push=push)
    by_bad = {key for key, _, worker in runs if worker == "bad"}
    assert by_bad, "the bad worker ran nothing before it was killed"
    print(f"40 jobs, bad worker killed after {len(by_bad)} runs: all completed in {took:.1f} s")
    assert took < TIMEOUT_S + GRACE_S


@JOB_WORKER_MODES
def test_jobs_of_a_worker_hanging_forever_complete_on_the_healthy_one(bootstrap, namespace, tmp_path, push):
    """With push, the hung worker's stream is pushed jobs it cannot run (its credits): they
    time out and are pushed to the healthy one, and once an attempt is overdue its RENEW
    asks for none."""
    took, runs, bad = _run_jobs(bootstrap, namespace, tmp_path, "recorded_hang", 12, push=push)
    hung = [(key, attempt) for key, attempt, worker in runs if worker == "bad"]
    assert 1 <= len(hung) <= 4, hung  # never more at once than its slots, never a second round
    assert "worker_leaving_group_attempts_overdue" in bad.log_text()
    print(f"12 jobs, {len(hung)} hung on the bad worker: all completed in {took:.1f} s")
    assert took < TIMEOUT_S + GRACE_S


def _run_activities(bootstrap, namespace, tmp_path, bad_function, count, kill_after_runs=None):
    runs = tmp_path / "runs.txt"
    engine, (good, bad) = _start_rig(tmp_path, bootstrap, namespace,
                                     _activity_worker(bootstrap, namespace, tmp_path, "good", "work", runs),
                                     _activity_worker(bootstrap, namespace, tmp_path, "bad", bad_function, runs))
    policy = RetryPolicy(initial_interval=timedelta(milliseconds=500), maximum_attempts=0)
    try:
        with Client(bootstrap, namespace) as client, ActivityClient(client) as activities:
            handles = [activities.schedule_activity("work", i, task_queue=QUEUE, activity_id=f"act-{i}",
                                                    start_to_close_timeout=timedelta(seconds=TIMEOUT_S),
                                                    retry_policy=policy) for i in range(count)]
            scheduled_at = time.monotonic()
            _let_the_bad_worker_run(runs, bad, kill_after_runs)
            results = [h.result(TIMEOUT_S + GRACE_S + 10) for h in handles]
            took = time.monotonic() - scheduled_at
        assert results == [i * 2 for i in range(count)]
        attempts = collections.Counter((activity_id, attempt) for activity_id, attempt, _ in _runs(runs))
        assert max(attempts.values()) == 1, f"ran twice: {[a for a, n in attempts.items() if n > 1]}"
        return took, _runs(runs), bad
    finally:
        for p in (engine, good, bad):
            p.stop()


def test_activities_of_a_worker_killed_mid_batch_complete_on_the_healthy_one(bootstrap, namespace, tmp_path):
    took, runs, _ = _run_activities(bootstrap, namespace, tmp_path, "slow_work", 20, kill_after_runs=3)
    print(f"20 activities, bad worker killed after {sum(w == 'bad' for _, _, w in runs)} runs: done in {took:.1f} s")
    assert took < TIMEOUT_S + 0.5 + GRACE_S


def test_activities_of_a_worker_hanging_forever_complete_on_the_healthy_one(bootstrap, namespace, tmp_path):
    took, runs, bad = _run_activities(bootstrap, namespace, tmp_path, "hanging_work", 6)
    hung = [(i, attempt) for i, attempt, worker in runs if worker == "bad"]
    assert hung and "worker_leaving_group_attempts_overdue" in bad.log_text()
    # Once it saw an attempt overdue the bad worker took nothing more: at most one round of
    # tasks it had started before the first deadline, never a retry of its own.
    assert all(attempt == 1 for _, attempt in hung), hung
    print(f"6 activities, {len(hung)} hung on the bad worker: all completed in {took:.1f} s")
    assert took < TIMEOUT_S + 0.5 + GRACE_S
