"""SIGKILL the engine and workers at random moments while workflows start, and check that
every process that was not killed lived: shared by the workflow, local activity and
child-workflow crash tests (through `ChaosRig`) and the takeover test."""

from __future__ import annotations

import contextlib
import json
import random
import time
from collections.abc import Iterator
from pathlib import Path

from tests.support.crash_workflow_checks import (COMPLETED, Runs, Starter, check_the_events_topic,
                                                 histories_from_the_client, open_activities, start_processes)
from tests.support.crash_workflows import EFFECTS_DIR_VARIABLE
from tests.support.engines import Process, combined_worker_process, engine_process
from tests.support.history import EventLog

#: How often the engine and each worker are SIGKILLed.
KILLS_EACH = 5


def assert_lived(process) -> None:
    """The process did not die by itself (only a kill of the test's may end it)."""
    assert process.alive(), f"{process.log_path.name}: the process died by itself:\n{process.log_text()[-3000:]}"


def stop_workers_that_lived(workers: list) -> None:
    for w in workers:
        assert_lived(w)
        w.stop()


def worker_stat(workers: list, name: str) -> int:
    """The sum of one count of the workers' last lives, from the stats a worker logs when it
    stops (a SIGKILLed life logs none)."""
    total = 0
    for w in workers:
        for line in w.log_text().splitlines():
            if '"workflow_worker_stopped"' in line:
                total += json.loads(line)["stats"].get(name, 0)
    return total


def tasks_handed_back(workers: list) -> int:
    """Workflow tasks the workers' last lives got as replies (the engine handed them back)."""
    return worker_stat(workers, "handed_back")


def tasks_rode_along(workers: list) -> int:
    """Workflow tasks the workers' last lives answered with an activity's completion and the
    engine accepted (`worker/ride_along.py`)."""
    return worker_stat(workers, "rode_along")


def completed_workflows(events: EventLog) -> int:
    """Runs completed so far, as the events topic has them now."""
    events.read_available()
    return events.count_value("WORKFLOW", COMPLETED)


def kill_at_random_moments(rng: random.Random, engine, workers: list, ids: list[str], starter: Starter,
                           events: EventLog) -> list[tuple[int, int]]:
    """SIGKILL and restart the engine and each worker KILLS_EACH times, in random order. Before
    each kill a new slice of the workflows is started, so every kill finds runs at every
    stage; after each restart wait until the process has its partitions back, so that work
    goes on between kills. Returns (submitted, completed) workflows at each kill."""
    return kill_in_turn(rng, engine, workers, ids, starter.start,
                        lambda: (starter.submitted(), completed_workflows(events)),
                        pause_s=(0.3, 1.5))  # a run takes about 2 s: most kills catch this slice running


def kill_in_turn(rng: random.Random, engine, workers: list, ids: list[str], begin, progress, *,
                 kills_each: int = KILLS_EACH, pause_s: tuple[float, float] = (0.3, 1.5)) -> list:
    """SIGKILL and restart the engine and each worker `kills_each` times, in random order:
    before each kill `begin(slice)` of `ids` and wait a random `pause_s`; after each restart
    wait until the process has its partitions back. The last slice is begun after the last
    kill. Returns `progress()` as it was at each kill."""
    victims = [engine, *workers] * kills_each
    rng.shuffle(victims)
    slices = [ids[n::len(victims) + 1] for n in range(len(victims) + 1)]
    at_kills = []
    for victim, workflow_ids in zip(victims, slices):
        begin(workflow_ids)
        time.sleep(rng.uniform(*pause_s))
        assert_lived(victim)
        at_kills.append(progress())
        victim.kill()
        mark = len(victim.log_text())
        victim.start()
        victim.wait_for_log("partitions_assigned" if victim is engine else "workflow_tasks_assigned", since=mark)
    begin(slices[-1])
    return at_kills


class ChaosRig:
    """One engine process and two combined worker processes of `queue`, started, and a
    reader of the events topic; `chaos` starts the workflows while the processes are killed."""

    def __init__(self, bootstrap: str, namespace: str, tmp_path: Path, engine_id: str, queue: str,
                 workflows: list[str], activities: list[str] = (), effects_dir: Path | None = None,
                 worker_options: tuple[str, ...] = ()) -> None:
        self.bootstrap, self.namespace, self.queue = bootstrap, namespace, queue
        env = {} if effects_dir is None else {EFFECTS_DIR_VARIABLE: str(effects_dir)}
        self.state_dir = tmp_path / "state"
        self.engine: Process = engine_process(bootstrap, namespace, engine_id, self.state_dir, tmp_path)
        self.workers: list[Process] = [
            combined_worker_process(bootstrap, namespace, queue, f"w{n}", tmp_path, workflows=workflows,
                                    activities=activities, options=worker_options, **env)
            for n in (1, 2)]
        self.events = EventLog(bootstrap, namespace)
        self.starter: Starter | None = None

    def chaos(self, rng: random.Random, ids: list[str], **starter_options) -> list[tuple[int, int]]:
        """Start the workflows `ids` (with a `Starter` of `starter_options`) while the engine
        and the workers are killed at random moments (`kill_at_random_moments`, whose
        progress it returns); every start has been answered when it returns."""
        self.starter = Starter(self.bootstrap, self.namespace, self.queue, **starter_options)
        progress = kill_at_random_moments(rng, self.engine, self.workers, ids, self.starter, self.events)
        self.starter.close()
        return progress

    def finish(self, count: int, sample_ids: list[str]) -> Runs:
        """Once `count` workflows completed: stop the workers (each must have lived), ask the
        client for the histories of `sample_ids`, stop the engine cleanly and check the
        events topic (`check_the_events_topic`). Returns the runs it holds. Stuck, it stops
        every process and says which activities the engine still held open."""
        try:
            self.events.read_until(lambda e: e.count_value("WORKFLOW", COMPLETED) >= count, timeout=180)
        except TimeoutError:
            for p in (*self.workers, self.engine):
                p.stop()
            raise AssertionError(f"stuck; open activities: {open_activities(self.state_dir)}") from None
        stop_workers_that_lived(self.workers)
        sample = histories_from_the_client(self.bootstrap, self.namespace, sample_ids)
        self.engine.stop()
        return check_the_events_topic(self.events, sample)

    def stop(self) -> None:
        self.events.close()
        if self.starter is not None:
            self.starter.abandon()
        for p in (*self.workers, self.engine):
            p.stop()


@contextlib.contextmanager
def chaos_rig(bootstrap: str, namespace: str, tmp_path: Path, engine_id: str, queue: str,
              workflows: list[str], **options) -> Iterator[ChaosRig]:
    """A started `ChaosRig`, stopped at the end whatever happened."""
    rig = ChaosRig(bootstrap, namespace, tmp_path, engine_id, queue, workflows, **options)
    try:
        start_processes(rig.engine, rig.workers)
        yield rig
    finally:
        rig.stop()
