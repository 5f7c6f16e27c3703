"""Workflows across SIGKILLs of the engine and of the workers: each completes exactly once.

1,000 workflows of three activities and a one-second timer run on two worker processes
(`streamproc worker start`) and one engine process, while the engine and each worker are
SIGKILLed at random moments, at least five times each. Afterwards, from the events topic
as a read_committed reader sees it: every workflow has exactly one
WORKFLOW_EXECUTION_COMPLETED with the right result, no history event was written twice,
every run's history is well-formed, and no activity step ran again after it completed
(each attempt at most once, none after the one that completed). The workers run the
activities eagerly and get the task after each with its completion (handed back on their
replies partition), or answer it with the completion when the run is idle on them (the
next task riding along), as by default.
"""

from __future__ import annotations

import collections
import random
import time

import orjson
import pytest

from tests.support.crash_chaos import KILLS_EACH, chaos_rig, tasks_handed_back, tasks_rode_along
from tests.support.crash_workflow_checks import check_completed_once, open_activities
from tests.support.crash_workflows import read_effects

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

COUNT = 1000
QUEUE = "crashy-flows"
WORKFLOW = "tests.support.crash_workflows:ThreeStepsAndATimer"
ACTIVITY = "tests.support.crash_workflows:crash_step"


def _completed_attempts(history: list) -> dict[int, int]:
    """Step number → the attempt whose result the workflow got (ActivityTaskStarted.attempt)."""
    step_of = {e.event_id: orjson.loads(e.attributes["input"])[1]
               for e in history if e.event_type == "ACTIVITY_TASK_SCHEDULED"}
    return {step_of[e.attributes["scheduled_event_id"]]: e.attributes["attempt"]
            for e in history if e.event_type == "ACTIVITY_TASK_STARTED"}


def _check_side_effects(effects: list[dict], runs: dict[str, list],
                        by_workflow: dict[str, list]) -> tuple[collections.Counter, collections.Counter]:
    """Attempts ran at most once each, and none after the attempt that completed the step.

    Returns how many steps ran how many attempts to the end, and how many steps completed
    with which attempt (an attempt killed mid-work records nothing, its retry does)."""
    ran = collections.Counter((e["workflow_id"], e["step"], e["attempt"]) for e in effects)
    assert max(ran.values()) == 1, [k for k, n in ran.items() if n > 1][:5]
    attempts_per_step, final_attempts = collections.Counter(), collections.Counter()
    for workflow_id, (run_id,) in by_workflow.items():
        for step, final in _completed_attempts(runs[run_id]).items():
            attempts = sorted(a for (w, s, a) in ran if w == workflow_id and s == step)
            assert attempts and attempts[-1] == final, (workflow_id, step, attempts, final)
            attempts_per_step[len(attempts)] += 1
            final_attempts[final] += 1
    return attempts_per_step, final_attempts


def test_workflows_complete_exactly_once_while_engine_and_workers_are_sigkilled(bootstrap, namespace, tmp_path):
    rng = random.Random(20261204)
    effects_dir = tmp_path / "effects"
    effects_dir.mkdir()
    ids = [f"crash-{n:04d}" for n in range(COUNT)]
    began = time.monotonic()
    with chaos_rig(bootstrap, namespace, tmp_path, "wf-crashy", QUEUE, [WORKFLOW], activities=[ACTIVITY],
                   effects_dir=effects_dir) as rig:
        progress = rig.chaos(rng, ids)
        chaos_s = time.monotonic() - began
        in_flight = sum(submitted > done for submitted, done in progress)
        assert in_flight >= len(progress) // 2, f"most kills found no workflow running: {progress}"
        assert rig.starter.started() == COUNT
        runs = rig.finish(COUNT, rng.sample(ids, 20))
        assert open_activities(rig.state_dir) == []
        # The workers ask for the next task with each eager activity's completion (the default):
        # the path the engine takes then is part of what the kills test.
        handed_back = tasks_handed_back(rig.workers)
        assert handed_back > 0, "no workflow task was handed back: the path went untested"
        # ... and, when the run is idle there, the next task's answer rides with the completion.
        rode_along = tasks_rode_along(rig.workers)
        assert rode_along > 0, "no workflow task rode with an activity's completion: the path went untested"
        by_workflow = check_completed_once(runs, ids)
        attempts_per_step, final_attempts = _check_side_effects(read_effects(effects_dir), runs, by_workflow)
        assert max(final_attempts) > 1, "no kill caught an activity running: the retry path went untested"
        print(f"\n{COUNT} workflows, {KILLS_EACH} kills of the engine and of each of {len(rig.workers)} workers "
              f"in {chaos_s:.1f} s ((submitted, completed) at each kill: {progress}), all done in "
              f"{time.monotonic() - began:.1f} s; steps by attempts run to the end: {dict(attempts_per_step)}, "
              f"by the attempt that completed them: {dict(final_attempts)}; workflow tasks handed back to the "
              f"workers' last lives: {handed_back}, answered with an activity's completion: {rode_along}")
