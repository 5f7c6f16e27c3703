"""The broker SIGKILLed under load and restarted, or away for two minutes: the engine and the
workers recover by themselves, and every job and workflow completes exactly once.

One engine process, a job worker and a workflow worker (`streamproc worker start`) run
against a single-node broker of the test's own (ports 29116-29119, state under tmp_path),
with jobs created at a steady rate and workflows started in slices. After each restart a
probe job and a probe workflow must complete within 30 s: that is the engine, both
workers and the client all back. At the end, from the events topic as a read_committed
reader sees it: every job created and completed once, every workflow completed once with
a well-formed history, and no event written twice.
"""

from __future__ import annotations

import collections
import json
import random
import threading
import time

import pytest

from streamproc.client import Client
from streamproc.client.workflow_events import workflow_event
from streamproc.devenv.broker import LocalBroker
from tests.support.crash_workflow_checks import (COMPLETED, Starter, assert_nothing_written_twice,
                                                 check_completed_once, runs_from_events)
from tests.support.crash_workflows import EFFECTS_DIR_VARIABLE, read_effects
from tests.support.engines import combined_worker_process, engine_process, worker_process
from tests.support.history import EventLog

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

NAMESPACE = "restarts"
QUEUE = "restart-flows"
WORKFLOW = "tests.support.crash_workflows:ThreeStepsAndATimer"
ACTIVITY = "tests.support.crash_workflows:crash_step"
#: Seconds within which the engine and the workers must be back after each restart.
RECOVERY_S = 30


class Rig:
    """The broker, an engine, a job worker, a workflow worker, paced job creates and the events."""

    def __init__(self, tmp_path, port: int) -> None:
        self.broker = LocalBroker(port=port, controller_port=port + 1, state_dir=tmp_path / "kafka",
                                  heap="-Xms512m -Xmx512m")
        self.bootstrap = self.broker.start()
        effects = tmp_path / "effects"
        effects.mkdir()
        self.effects = effects
        self.engine = engine_process(self.bootstrap, NAMESPACE, "restarts", tmp_path / "state", tmp_path,
                                     partitions=2).start()
        self.job_runs = tmp_path / "job-runs.txt"  # `key attempt worker` per handler run
        self.job_worker = worker_process(self.bootstrap, NAMESPACE, "flow", "jobs", tmp_path,
                                         handler="tests.support.handlers:recorded_double",
                                         STREAMPROC_TEST_RUNS=str(self.job_runs), STREAMPROC_TEST_WORKER="jobs")
        self.flow_worker = combined_worker_process(self.bootstrap, NAMESPACE, QUEUE, "flows", tmp_path,
                                                   workflows=[WORKFLOW], activities=[ACTIVITY],
                                                   **{EFFECTS_DIR_VARIABLE: str(effects)})
        self.events = EventLog(self.bootstrap, NAMESPACE)
        self.client = Client(self.bootstrap, NAMESPACE)
        self.starter: Starter | None = None
        self.jobs = 0
        self.workflow_ids: list[str] = []
        self._stop = threading.Event()
        self._creator = threading.Thread(target=self._create_jobs, daemon=True)

    def start(self) -> None:
        self.engine.wait_for_log("partitions_assigned", timeout=90)
        for w in (self.job_worker, self.flow_worker):
            w.start()
        self.flow_worker.wait_for_log("workflow_tasks_assigned", timeout=90)
        self.starter = Starter(self.bootstrap, NAMESPACE, QUEUE)
        self._creator.start()

    def _create_jobs(self) -> None:
        while not self._stop.wait(0.05):  # 20 jobs a second
            self.client.create_job("flow", {"n": self.jobs}, request_id=f"job-{self.jobs}")
            self.jobs += 1

    def start_workflows(self, prefix: str, count: int) -> None:
        ids = [f"{prefix}-{n:03d}" for n in range(count)]
        self.workflow_ids += ids
        self.starter.start(ids)

    def probe(self, name: str, timeout: float) -> float:
        """Seconds until a new job and a new workflow both completed (their events read back)."""
        began = time.monotonic()
        self.client.create_job("flow", {"n": -1}, request_id=f"probe-{name}")
        self.start_workflows(f"probe-{name}", 1)
        workflow_id = self.workflow_ids[-1]

        def done(events: EventLog) -> bool:
            keys = {e.key for e in events.events(intent="CREATED") if e.request_id == f"probe-{name}"}
            job_done = any(e.key in keys for e in events.events(intent="COMPLETED"))
            flow_done = any(workflow_event(e).workflow_id == workflow_id
                            for e in events.events("WORKFLOW", COMPLETED))
            return job_done and flow_done
        self.events.read_until(done, timeout=timeout)
        return time.monotonic() - began

    def stop_creating(self) -> int:
        self._stop.set()
        self._creator.join(60)
        self.client.flush(120)
        return self.jobs

    def assert_alive(self) -> None:
        for p in (self.engine, self.job_worker, self.flow_worker):
            assert p.alive(), f"{p.log_path.name} died:\n{p.log_text()[-3000:]}"

    def check_everything_once(self) -> None:
        jobs = self.stop_creating()
        self.starter.close()
        expected = jobs + sum(1 for e in self.events.events(intent="CREATED") if e.request_id.startswith("probe-"))
        self.events.read_until(lambda e: e.count("COMPLETED") >= expected
                               and e.count_value("WORKFLOW", COMPLETED) >= len(self.workflow_ids), timeout=240)
        self.engine.stop()
        self.events.read_to_end(timeout=60)
        created = collections.Counter(e.request_id for e in self.events.events(intent="CREATED"))
        assert set(created.values()) == {1}, "a job was created twice"
        assert sum(1 for r in created if r.startswith("job-")) == jobs, "a job was lost"
        keys = {e.key for e in self.events.events(intent="CREATED")}
        completed = collections.Counter(e.key for e in self.events.events(intent="COMPLETED"))
        assert set(completed) == keys and set(completed.values()) == {1}, "a job not completed, or twice"
        handler_runs = collections.Counter(tuple(line.split()[:2]) for line in self.job_runs.read_text().splitlines())
        twice = [run for run, n in handler_runs.items() if n > 1]
        assert not twice, f"job handlers ran twice for one attempt: {twice[:5]}"
        runs = runs_from_events(self.events)
        assert_nothing_written_twice(self.events, runs)
        check_completed_once(runs, self.workflow_ids)
        # Activity side effects: at most once per attempt (a worker's slice, reported, not asserted).
        ran = collections.Counter((e["workflow_id"], e["step"], e["attempt"]) for e in read_effects(self.effects))
        self.attempts_run_twice = sum(1 for n in ran.values() if n > 1)

    def close(self) -> None:
        self._stop.set()
        if self.starter is not None:
            self.starter.abandon()
        self.events.close()
        for p in (self.flow_worker, self.job_worker, self.engine):
            p.stop()
        self.client.close()
        self.broker.kill()


def _engine_log_lines(rig: Rig, since: int) -> list[dict]:
    lines = []
    for line in rig.engine.log_text()[since:].splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            lines.append({"event": line})  # not ours (librdkafka's own stderr): counted too
    return lines


@pytest.mark.timeout(900)
def test_the_broker_sigkilled_under_load_5_times_and_back_after_10_s(tmp_path):
    rng = random.Random(20261124)
    rig = Rig(tmp_path, 29116)
    recoveries = []
    try:
        rig.start()
        rig.start_workflows("before", 40)
        for n in range(5):
            time.sleep(rng.uniform(1.0, 3.0))  # the kill finds transactions and workflows in flight
            rig.start_workflows(f"during-{n}", 20)
            rig.broker.kill()
            time.sleep(10)
            rig.broker.start()
            recoveries.append(round(rig.probe(f"restart-{n}", timeout=RECOVERY_S), 1))
            rig.assert_alive()
        rig.check_everything_once()
        print(f"\n5 broker restarts: engine and workers back (probe job and workflow done) after {recoveries} s; "
              f"{rig.jobs} jobs and {len(rig.workflow_ids)} workflows completed once each; activity attempts "
              f"that ran twice: {rig.attempts_run_twice}")
    finally:
        rig.close()


@pytest.mark.timeout(900)
def test_the_broker_away_for_2_minutes(tmp_path):
    rig = Rig(tmp_path, 29118)
    try:
        rig.start()
        rig.start_workflows("before", 30)
        time.sleep(1.5)  # most of them are running when the broker goes
        mark = len(rig.engine.log_text())
        rig.broker.kill()
        killed = time.monotonic()
        while time.monotonic() - killed < 120:
            time.sleep(5)
            rig.assert_alive()
        outage = _engine_log_lines(rig, mark)
        kinds = collections.Counter(line.get("event") for line in outage)
        print(f"\nbroker away 120 s: {len(outage)} engine log lines meanwhile {dict(kinds)}")
        rig.broker.start()
        back = rig.probe("after", timeout=RECOVERY_S * 2)
        rig.start_workflows("after", 10)
        rig.check_everything_once()
        print(f"probe done {back:.1f} s after the restart; {rig.jobs} jobs and {len(rig.workflow_ids)} workflows "
              f"completed once each")
        assert len(outage) < 40, f"{len(outage)} engine log lines in a 2-minute outage: {dict(kinds)}"
        assert "engine_stalled" in kinds, "the outage was not reported"
    finally:
        rig.close()
