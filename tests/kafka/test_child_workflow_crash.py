"""Parents, children and the signals between them across SIGKILLs of the engine and workers.

300 `FamilyParent`s each start 3 `FamilyChild`ren and exchange signals with them (parent →
child through the child's handle, child → parent through an external handle), on four
partitions, while the engine and both worker processes are SIGKILLed five times each.
Afterwards, from the events topic: every parent and every child has exactly one run that
completed once, with the right result; each parent got each child's acknowledgement
exactly once; no history event was written twice; every history is well-formed; and no
child is left running.
"""

from __future__ import annotations

import random
import time

import orjson
import pytest

from tests.support.crash_chaos import KILLS_EACH, chaos_rig, stop_workers_that_lived
from tests.support.crash_children import CHILDREN, FamilyParent, expected
from tests.support.crash_workflow_checks import COMPLETED, assert_nothing_written_twice, check_histories, runs_from_events

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

PARENTS = 300
QUEUE = "crashy-families"
WORKFLOWS = ["tests.support.crash_children:FamilyParent", "tests.support.crash_children:FamilyChild"]


def test_parents_and_children_complete_once_while_engine_and_workers_are_sigkilled(bootstrap, namespace, tmp_path):
    rng = random.Random(20261125)
    ids = [f"family-{n:03d}" for n in range(PARENTS)]
    total = PARENTS * (1 + CHILDREN)
    began = time.monotonic()
    with chaos_rig(bootstrap, namespace, tmp_path, "family-crashy", QUEUE, WORKFLOWS) as rig:
        events = rig.events
        progress = rig.chaos(rng, ids, workflow=FamilyParent.run)
        assert rig.starter.started() == PARENTS, rig.starter.failures()[:5]
        try:
            events.read_until(lambda e: e.count_value("WORKFLOW", COMPLETED) >= total, timeout=240)
        except TimeoutError:
            raise AssertionError(f"{events.count_value('WORKFLOW', COMPLETED)} of {total} completed") from None
        stop_workers_that_lived(rig.workers)
        rig.engine.stop()
        events.read_to_end(timeout=60)

        runs = runs_from_events(events)
        assert_nothing_written_twice(events, runs)
        by_workflow = check_histories(runs)
        for run_id, history in runs.items():
            closes = [e.event_type for e in history if e.is_close]
            assert closes == [COMPLETED], (history[0].workflow_id, closes)  # none left running, none killed
        family = sorted([*ids, *(f"{p}-c{n}" for p in ids for n in range(CHILDREN))])
        assert sorted(by_workflow) == family
        assert {len(r) for r in by_workflow.values()} == {1}, "a workflow has more than one run"
        for parent_id in ids:
            (run_id,) = by_workflow[parent_id]
            close = next(e for e in runs[run_id] if e.is_close)
            result = orjson.loads(close.attributes["result"])
            assert {**result, "acks": sorted(result["acks"])} == expected(parent_id), (parent_id, result)
        print(f"\n{PARENTS} parents x {CHILDREN} children, {KILLS_EACH} kills of the engine and of each of 2 workers "
              f"((submitted, completed) at each kill: {progress}); all done in {time.monotonic() - began:.1f} s")
