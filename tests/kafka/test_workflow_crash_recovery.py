"""Workflows across SIGKILLs of the engine and of the workers: each completes exactly once.

1,000 workflows of three activities and a one-second timer run on two worker processes
(`streamproc worker start`) and one engine process, while the engine and each worker are
SIGKILLed at random moments, at least five times each. Afterwards, from the events topic
as a read_committed reader sees it: every workflow has exactly one
WORKFLOW_EXECUTION_COMPLETED with the right result, no history event was written twice,
every run's history is well-formed, and no activity step ran again after it completed
(each attempt at most once, none after the one that completed).
"""

from __future__ import annotations

import collections
import random
import time
from concurrent.futures import ThreadPoolExecutor

import orjson
import pytest

from streamproc.client import Client
from streamproc.client.workflow_events import workflow_event
from streamproc.semantics.workflow_history import EventType, check_well_formed
from streamproc.state.db import PartitionDb
from streamproc.state.families import Family
from tests.support.crash_workflows import (
    EFFECTS_DIR_VARIABLE,
    ThreeStepsAndATimer,
    expected_result,
    read_effects,
)
from tests.support.engines import combined_worker_process, engine_process
from tests.support.history import EventLog

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

COUNT = 1000
QUEUE = "crashy-flows"
KILLS_EACH = 5
WORKFLOW = "tests.support.crash_workflows:ThreeStepsAndATimer"
ACTIVITY = "tests.support.crash_workflows:crash_step"
COMPLETED = "WORKFLOW_EXECUTION_COMPLETED"


class Starter:
    """Starts workflows through the client from a few threads; a start waits out engine restarts."""

    def __init__(self, bootstrap: str, namespace: str) -> None:
        self.client = Client(bootstrap, namespace)
        self.pool = ThreadPoolExecutor(8)
        self.futures = []

    def start(self, workflow_ids: list[str]) -> None:
        self.futures += [self.pool.submit(self.client.start_workflow, ThreeStepsAndATimer.run, workflow_id,
                                          id=workflow_id, task_queue=QUEUE, rpc_timeout=120)
                         for workflow_id in workflow_ids]

    def submitted(self) -> int:
        return len(self.futures)

    def started(self) -> int:
        return sum(1 for f in self.futures if f.done() and f.exception() is None)

    def close(self) -> None:
        self.pool.shutdown(wait=True)
        self.client.close_workflow_requests()
        self.client.close()


def _kill_at_random_moments(rng: random.Random, engine, workers: list, ids: list[str], starter: Starter,
                            completed) -> list[tuple[int, int]]:
    """SIGKILL and restart the engine and each worker KILLS_EACH times, in random order. Before
    each kill a new slice of the workflows is started, so every kill finds runs at every
    stage; after each restart wait until the process has its partitions back, so that work
    goes on between kills. Returns (submitted, completed) workflows at each kill."""
    victims = [engine, *workers] * KILLS_EACH
    rng.shuffle(victims)
    slices = [ids[n::len(victims) + 1] for n in range(len(victims) + 1)]
    progress = []
    for victim, workflow_ids in zip(victims, slices):
        starter.start(workflow_ids)
        time.sleep(rng.uniform(0.3, 1.5))  # a run takes about 2 s: most kills catch this slice running
        assert victim.alive(), f"{victim.log_path.name}: the process died by itself:\n{victim.log_text()[-3000:]}"
        progress.append((starter.submitted(), completed()))
        victim.kill()
        mark = len(victim.log_text())
        victim.start()
        victim.wait_for_log("partitions_assigned" if victim is engine else "workflow_tasks_assigned", since=mark)
    starter.start(slices[-1])
    return progress


def _histories_from_the_client(bootstrap: str, namespace: str, workflow_ids: list[str]) -> dict[str, list]:
    """Run id → history (GET_HISTORY) of the current run of each of `workflow_ids`."""
    with Client(bootstrap, namespace) as client:
        histories = {}
        for workflow_id in workflow_ids:
            run_id = client.get_workflow_handle(workflow_id).describe().run_id
            histories[run_id] = client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history().events
        client.close_workflow_requests()
    return histories


def _open_activities(state_dir) -> list[dict]:
    """The activities an (stopped) engine's partitions still hold open."""
    found = []
    for path in sorted(state_dir.glob("*/partition-*")):
        db = PartitionDb(path, int(path.name.split("-")[1]))
        try:
            found += [orjson.loads(value) for _, value in db.scan(Family.ACTIVITIES)]
        finally:
            db.close()
    return found


def _runs(events: EventLog) -> dict[str, list]:
    """History events per run id, in event id order, as rebuilt from the events topic."""
    runs: dict[str, list] = collections.defaultdict(list)
    for record in events.events("WORKFLOW"):
        event = workflow_event(record)
        runs[event.run_id].append(event)
    for history in runs.values():
        history.sort(key=lambda e: e.event_id)
    return runs


def _check_histories(runs: dict[str, list], ids: list[str]) -> dict[str, list]:
    """Each workflow: one run, a gapless well-formed history, one completion with its result."""
    by_workflow = collections.defaultdict(list)
    for run_id, history in runs.items():
        by_workflow[history[0].workflow_id].append(run_id)
        assert [e.event_id for e in history] == list(range(1, len(history) + 1)), f"{run_id}: gaps or twice"
        problems = check_well_formed([(e.event_id, EventType[e.event_type], e.attributes) for e in history])
        assert problems == [], (run_id, problems)
    assert sorted(by_workflow) == sorted(ids)
    assert {len(r) for r in by_workflow.values()} == {1}, "a workflow has more than one run"
    for workflow_id, (run_id,) in by_workflow.items():
        history = runs[run_id]
        closes = [e for e in history if e.is_close]
        assert [e.event_type for e in closes] == [COMPLETED], (workflow_id, closes)
        assert orjson.loads(closes[0].attributes["result"]) == expected_result(workflow_id)
        types = collections.Counter(e.event_type for e in history)
        assert (types["ACTIVITY_TASK_SCHEDULED"], types["ACTIVITY_TASK_COMPLETED"], types["TIMER_FIRED"]) == (3, 3, 1)
    return by_workflow


def _completed_attempts(history: list) -> dict[int, int]:
    """Step number → the attempt whose result the workflow got (ActivityTaskStarted.attempt)."""
    step_of = {e.event_id: orjson.loads(e.attributes["input"])[1]
               for e in history if e.event_type == "ACTIVITY_TASK_SCHEDULED"}
    return {step_of[e.attributes["scheduled_event_id"]]: e.attributes["attempt"]
            for e in history if e.event_type == "ACTIVITY_TASK_STARTED"}


def _check_side_effects(effects: list[dict], runs: dict[str, list], by_workflow: dict[str, list]) -> collections.Counter:
    """Attempts ran at most once each, and none after the attempt that completed the step."""
    ran = collections.Counter((e["workflow_id"], e["step"], e["attempt"]) for e in effects)
    assert max(ran.values()) == 1, [k for k, n in ran.items() if n > 1][:5]
    attempts_per_step = collections.Counter()
    for workflow_id, (run_id,) in by_workflow.items():
        for step, final in _completed_attempts(runs[run_id]).items():
            attempts = sorted(a for (w, s, a) in ran if w == workflow_id and s == step)
            assert attempts and attempts[-1] == final, (workflow_id, step, attempts, final)
            attempts_per_step[len(attempts)] += 1
    return attempts_per_step


def test_workflows_complete_exactly_once_while_engine_and_workers_are_sigkilled(bootstrap, namespace, tmp_path):
    rng = random.Random(20261204)
    effects_dir = tmp_path / "effects"
    effects_dir.mkdir()
    engine = engine_process(bootstrap, namespace, "wf-crashy", tmp_path / "state", tmp_path)
    workers = [combined_worker_process(bootstrap, namespace, QUEUE, f"w{n}", tmp_path, workflows=[WORKFLOW],
                                       activities=[ACTIVITY], **{EFFECTS_DIR_VARIABLE: str(effects_dir)})
               for n in (1, 2)]
    events = EventLog(bootstrap, namespace)
    ids = [f"crash-{n:04d}" for n in range(COUNT)]
    starter = None
    began = time.monotonic()
    try:
        engine.start().wait_for_log("partitions_assigned")
        for w in workers:
            w.start()
        for w in workers:
            w.wait_for_log("workflow_tasks_assigned")
        starter = Starter(bootstrap, namespace)
        def completed() -> int:
            events.read_available()
            return events.count_value("WORKFLOW", COMPLETED)
        progress = _kill_at_random_moments(rng, engine, workers, ids, starter, completed)
        chaos_s = time.monotonic() - began
        in_flight = sum(submitted > done for submitted, done in progress)
        assert in_flight >= len(progress) // 2, f"most kills found no workflow running: {progress}"
        starter.close()
        assert starter.started() == COUNT
        try:
            events.read_until(lambda e: e.count_value("WORKFLOW", COMPLETED) >= COUNT, timeout=180)
        except TimeoutError:
            for p in (*workers, engine):
                p.stop()
            raise AssertionError(f"stuck; open activities: {_open_activities(tmp_path / 'state')}") from None
        for w in workers:
            assert w.alive(), f"{w.log_path.name}: the process died by itself:\n{w.log_text()[-3000:]}"
            w.stop()
        sample = _histories_from_the_client(bootstrap, namespace, rng.sample(ids, 20))
        # Stop the engine cleanly, then read the events topic to its end: no late duplicate hides.
        engine.stop()
        events.read_to_end(timeout=60)
        assert _open_activities(tmp_path / "state") == []

        # Answers to a command written twice (a command replayed after a crash). Commands the
        # due-date checker made inside a transaction have no position (-1): the history check
        # below covers what they wrote.
        replayed = [d for d in events.duplicates() if d[1] >= 0]
        assert replayed == [], replayed[:5]
        runs = _runs(events)
        twice = [k for k, n in collections.Counter(
            (e.run_id, e.event_id) for h in runs.values() for e in h).items() if n > 1]
        assert twice == []
        by_workflow = _check_histories(runs, ids)
        attempts_per_step = _check_side_effects(read_effects(effects_dir), runs, by_workflow)
        assert max(attempts_per_step) > 1, "no kill caught an activity running: the retry path went untested"
        for run_id, fetched in sample.items():  # the client's view is the events topic's
            assert fetched == [e.as_history_event() for e in runs[run_id]]
        print(f"\n{COUNT} workflows, {KILLS_EACH} kills of the engine and of each of {len(workers)} workers "
              f"in {chaos_s:.1f} s ((submitted, completed) at each kill: {progress}), all done in "
              f"{time.monotonic() - began:.1f} s; steps by attempts run: {dict(attempts_per_step)}")
    finally:
        events.close()
        if starter is not None:
            starter.pool.shutdown(wait=False, cancel_futures=True)
        for p in (*workers, engine):
            p.stop()
