"""Workflows of local activities across SIGKILLs of the engine and of the workers: each
completes exactly once.

The workflow crash test's shape with its three steps as local activities: 300 workflows
run on two worker processes and one engine process while each is SIGKILLed at random
moments, five times. Afterwards, from the events topic as a read_committed reader sees
it: every workflow has exactly one WORKFLOW_EXECUTION_COMPLETED with the right result and
three markers, no history event was written twice, every history is well-formed, and
every step ran. Once with the markers written at the task's end (Temporal's way), once with
each marker journaled to the log before the next step runs (`--checkpoint-local-activities`,
JOURNAL_MARKERS), whose markers a task that dies hands to its next attempt. A step may have run more than once (a worker killed after the function
ran and before its task completed leaves no marker): local activities are at least once.
"""

from __future__ import annotations

import collections
import random
import time

import pytest

from tests.support.crash_chaos import KILLS_EACH, chaos_rig, worker_stat
from tests.support.crash_workflow_checks import check_completed_once
from tests.support.crash_workflows import ThreeLocalStepsAndATimer, read_effects

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

COUNT = 300
QUEUE = "crashy-local-flows"
WORKFLOW = "tests.support.crash_workflows:ThreeLocalStepsAndATimer"


@pytest.mark.parametrize("worker_options", [(), ("--checkpoint-local-activities",)],
                         ids=["markers_at_task_end", "checkpointed_markers_journaled"])
def test_local_activity_workflows_complete_exactly_once_while_engine_and_workers_are_sigkilled(
        bootstrap, namespace, tmp_path, worker_options):
    rng = random.Random(20261127)
    effects_dir = tmp_path / "effects"
    effects_dir.mkdir()
    ids = [f"local-crash-{n:04d}" for n in range(COUNT)]
    began = time.monotonic()
    with chaos_rig(bootstrap, namespace, tmp_path, "local-crashy", QUEUE, [WORKFLOW],
                   effects_dir=effects_dir, worker_options=worker_options) as rig:
        progress = rig.chaos(rng, ids, workflow=ThreeLocalStepsAndATimer.run)
        assert rig.starter.started() == COUNT
        runs = rig.finish(COUNT, rng.sample(ids, 20))
        if worker_options:  # the workers' last lives logged what they journaled
            assert worker_stat(rig.workers, "markers_journaled") > 0, "no marker was journaled: the path went untested"
        check_completed_once(runs, ids, local=True)
        ran = collections.Counter((e["workflow_id"], e["step"]) for e in read_effects(effects_dir))
        assert set(ran) == {(w, step) for w in ids for step in (1, 2, 3)}, "every step ran"
        print(f"\n{COUNT} local activity workflows, {KILLS_EACH} kills of the engine and of each worker "
              f"((submitted, completed) at each kill: {progress}), all done in {time.monotonic() - began:.1f} s; "
              f"steps by times run: {dict(collections.Counter(ran.values()))}")
