"""A broker (or a cluster of them), an engine, a job worker and a workflow worker under a
steady load, and the checks that every job and workflow completed exactly once: shared by
the broker-restart and the cluster-failover tests."""

from __future__ import annotations

import collections
import threading
import time

from streamproc.client import Client
from streamproc.client.workflow_events import workflow_event
from streamproc.devenv.broker import LocalBroker
from streamproc.devenv.broker_process import read_pid
from tests.support.broker_pulse import BrokerPulse
from tests.support.crash_workflow_checks import (COMPLETED, Starter, assert_nothing_written_twice,
                                                 check_completed_once, runs_from_events)
from tests.support.crash_workflows import EFFECTS_DIR_VARIABLE, ThreeLocalStepsAndATimer, read_effects
from tests.support.engines import combined_worker_process, engine_process, with_process_logs, worker_process
from tests.support.history import EventLog

NAMESPACE = "restarts"
QUEUE = "restart-flows"
WORKFLOW = "tests.support.crash_workflows:ThreeStepsAndATimer"
LOCAL_WORKFLOW = "tests.support.crash_workflows:ThreeLocalStepsAndATimer"
ACTIVITY = "tests.support.crash_workflows:crash_step"
#: Seconds within which the engine and the workers must be back after each restart, counted
#: from when the broker answers again (a single broker: see `broker_pulse`; a cluster: from
#: the probe's start): a bound for correctness on a busy two-core machine, not the goal; the
#: time it takes is printed, and measured in bench/broker_restart_recovery.py. Counted from the
#: broker's answer because a restarted broker was seen in CI silent for 26 s and then 31 s
#: (a stall of its JVM on the machine, not of the engine), which a bound from the probe's
#: start cannot absorb.
RECOVERY_S = 120


class Rig:
    """The broker, an engine, a job worker, a workflow worker, paced job creates and the events."""

    def __init__(self, tmp_path, broker, *, push_jobs: bool = False, journaled_local_steps: bool = False) -> None:
        """`broker`: a LocalBroker or LocalCluster, not started yet (started here, killed by close).
        `push_jobs`: the job worker takes its jobs pushed (`--push`); `journaled_local_steps`: the
        workflows' steps are local activities, each journaled before the next
        (`--checkpoint-local-activities`)."""
        self.broker = broker
        self.bootstrap = self.broker.start()
        #: the broker's answers, apart from the processes under test (a single broker only)
        self.pulse = (BrokerPulse("127.0.0.1", broker.port, lambda: read_pid(broker.pid_file))
                      if isinstance(broker, LocalBroker) else None)
        effects = tmp_path / "effects"
        effects.mkdir()
        self.effects = effects
        self.engine = engine_process(self.bootstrap, NAMESPACE, "restarts", tmp_path / "state", tmp_path,
                                     partitions=2).start()
        self.job_runs = tmp_path / "job-runs.txt"  # `key attempt worker` per handler run
        self.job_worker = worker_process(self.bootstrap, NAMESPACE, "flow", "jobs", tmp_path,
                                         handler="tests.support.handlers:recorded_double",
                                         options=("--push",) if push_jobs else (),
                                         STREAMPROC_TEST_RUNS=str(self.job_runs), STREAMPROC_TEST_WORKER="jobs")
        self.local = journaled_local_steps
        self.flow_worker = combined_worker_process(
            self.bootstrap, NAMESPACE, QUEUE, "flows", tmp_path,
            **(dict(workflows=[LOCAL_WORKFLOW], options=("--checkpoint-local-activities",)) if self.local
               else dict(workflows=[WORKFLOW], activities=[ACTIVITY])),
            **{EFFECTS_DIR_VARIABLE: str(effects)})
        self.events = EventLog(self.bootstrap, NAMESPACE)
        self.client = Client(self.bootstrap, NAMESPACE)
        self.starter: Starter | None = None
        self.jobs = 0
        #: workflow starts the client gave up once (asked again by the starter)
        self.start_give_ups: list[str] = []
        self.workflow_ids: list[str] = []
        self._stop = threading.Event()
        self._creator = threading.Thread(target=self._create_jobs, daemon=True)

    def start(self) -> None:
        self.engine.wait_for_log("partitions_assigned", timeout=90)
        for w in (self.job_worker, self.flow_worker):
            w.start()
        self.flow_worker.wait_for_log("workflow_tasks_assigned", timeout=90)
        # A fault while a worker still starts is not what is tested (a job worker that could
        # not read its replies partition for 60 s at start exits).
        self.job_worker.wait_for_log("tasks_assigned", timeout=90)
        self.starter = Starter(self.bootstrap, NAMESPACE, QUEUE,
                               **({"workflow": ThreeLocalStepsAndATimer.run} if self.local else {}))
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
        """Seconds until a new job and a new workflow both completed (their events read back),
        counted from when the broker answers again; fails `timeout` s after that."""
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
        while not done(self.events):
            now = time.monotonic()
            since = self._answering_since(began)
            if (since is not None and now - since > timeout) or now - began > 3 * timeout:
                self._read_until(done, 0)  # raises with the logs
            self.events.read_available()
        return time.monotonic() - (self._answering_since(began) or began)

    def _answering_since(self, began: float) -> float | None:
        """Since when the broker answers without a break (not before `began`), None while it does not."""
        since = self.pulse.answering_since if self.pulse is not None else began
        return None if since is None else max(since, began)

    def broker_stall_list(self) -> list[tuple[str, float, str]]:
        """The broker's stalls seen so far, (wall-clock start, seconds, snapshot) (none for a cluster)."""
        return list(self.pulse.stalls) if self.pulse is not None else []

    def broker_stalls(self) -> str:
        """The broker's stalls seen so far (none for a cluster)."""
        return self.pulse.describe_stalls() if self.pulse is not None else ""

    def _read_until(self, done, timeout: float) -> None:
        """Read events until `done`; on timeout, say what the processes, the starts and the
        broker said."""
        def failed_starts() -> str:
            failed = self.starter.failures() if self.starter is not None else []
            return (f"\nworkflow starts that failed ({len(failed)}): {failed[:10]}"
                    f"\nbroker stalls: {self.broker_stalls() or 'none'}")
        with with_process_logs((self.engine, self.job_worker, self.flow_worker), failed_starts):
            self.events.read_until(done, timeout=timeout)

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
        self.start_give_ups = self.starter.give_ups
        expected = jobs + sum(1 for e in self.events.events(intent="CREATED") if e.request_id.startswith("probe-"))
        self._read_until(lambda e: e.count("COMPLETED") >= expected
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
        check_completed_once(runs, self.workflow_ids, local=self.local)
        # Activity side effects: at most once per attempt (a worker's slice, reported, not asserted).
        ran = collections.Counter((e["workflow_id"], e["step"], e["attempt"]) for e in read_effects(self.effects))
        self.attempts_run_twice = sum(1 for n in ran.values() if n > 1)

    def wait_for_push(self, timeout: float) -> float:
        """Seconds until a job created from now on is pushed (the push worker's stream is
        registered again); fails after `timeout` s."""
        began, since = time.monotonic(), self.jobs
        self._read_until(lambda events: events.pushed_jobs(since) > 0, timeout)
        return time.monotonic() - began

    def close(self) -> None:
        self._stop.set()
        if self.pulse is not None:
            self.pulse.close()
        if self.starter is not None:
            self.starter.abandon()
        self.events.close()
        for p in (self.flow_worker, self.job_worker, self.engine):
            p.stop()
        self.client.close()
        self.broker.kill()
