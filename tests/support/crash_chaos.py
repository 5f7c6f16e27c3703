"""SIGKILL the engine and workers at random moments while workflows start, and check that
every process that was not killed lived: shared by the workflow and child-workflow crash
tests and the takeover test."""

from __future__ import annotations

import random
import time

from tests.support.crash_workflow_checks import COMPLETED, Starter
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
    victims = [engine, *workers] * KILLS_EACH
    rng.shuffle(victims)
    slices = [ids[n::len(victims) + 1] for n in range(len(victims) + 1)]
    progress = []
    for victim, workflow_ids in zip(victims, slices):
        starter.start(workflow_ids)
        time.sleep(rng.uniform(0.3, 1.5))  # a run takes about 2 s: most kills catch this slice running
        assert_lived(victim)
        progress.append((starter.submitted(), completed_workflows(events)))
        victim.kill()
        mark = len(victim.log_text())
        victim.start()
        victim.wait_for_log("partitions_assigned" if victim is engine else "workflow_tasks_assigned", since=mark)
    starter.start(slices[-1])
    return progress
