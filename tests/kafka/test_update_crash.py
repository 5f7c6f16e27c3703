"""Updates and signals from clients across SIGKILLs of the engine and of the workers: each
is applied exactly once, and each update's caller gets its answer.

40 `Tally` workflows run on two worker processes and one engine process. For each, a
client thread sends four updates one after another (each waiting for its result), then
three signals and `finish` (PAUSE_S apart), while the engine and each worker are SIGKILLed at random
moments, three times each; before each kill a new slice of the workflows starts, so each
kill finds requests at every stage. A request whose outcome is unknown is sent again under the same
update id or request id, as a careful caller does. Afterwards, from the events topic as a
read_committed reader sees it: every workflow completed once with the total of what was
sent and each update and signal applied once, one accepted and one completed event per
update id, no history event written twice, every history well-formed; and each update's
answers rose with each call (an update applied twice, or answered from another's outcome,
would break that).
"""

from __future__ import annotations

import collections
import random
import time
from concurrent.futures import ThreadPoolExecutor

import orjson
import pytest

from streamproc.client import SyncClient
from tests.support.crash_chaos import chaos_rig, kill_in_turn
from tests.support.crash_updates import (SIGNALS_EACH, UPDATES_EACH, Tally, expected_names, expected_total,
                                         send_all)
from tests.support.crash_workflow_checks import COMPLETED, Starter, check_histories

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

COUNT = 40
KILLS_EACH = 3
QUEUE = "crashy-updates"
WORKFLOW = "tests.support.crash_updates:Tally"
#: Between one workflow's requests: its eight span a few seconds, so kills find them under way.
PAUSE_S = 0.4


def test_updates_and_signals_are_applied_once_while_engine_and_workers_are_sigkilled(bootstrap, namespace, tmp_path):
    rng = random.Random(20261128)
    ids = [f"tally-{n:03d}" for n in range(COUNT)]
    began = time.monotonic()
    with chaos_rig(bootstrap, namespace, tmp_path, "update-crashy", QUEUE, [WORKFLOW]) as rig:
        starter = Starter(bootstrap, namespace, QUEUE, workflow=Tally.run)
        rig.starter = starter
        give_ups: list[str] = []
        senders: dict = {}
        with SyncClient(bootstrap, namespace) as client, ThreadPoolExecutor(8) as pool:
            def send(workflow_ids: list[str]) -> None:
                starter.start(workflow_ids)
                senders.update({wid: pool.submit(_after_start, starter, wid, client, give_ups)
                                for wid in workflow_ids})
            kills = kill_in_turn(rng, rig.engine, rig.workers, ids, send,
                                 lambda: (len(senders), sum(f.done() for f in senders.values())),
                                 kills_each=KILLS_EACH, pause_s=(0.5, 2.0))
            answers = {wid: f.result(timeout=300) for wid, f in senders.items()}
            client.close_workflow_requests()
        starter.close()
        runs = rig.finish(COUNT, rng.sample(ids, 5))

    by_workflow = check_histories(runs)
    assert sorted(by_workflow) == ids and {len(r) for r in by_workflow.values()} == {1}, "one run each"
    for workflow_id, (run_id,) in by_workflow.items():
        history = runs[run_id]
        closes = [e for e in history if e.is_close]
        assert [e.event_type for e in closes] == [COMPLETED], (workflow_id, closes)
        result = orjson.loads(closes[0].attributes["result"])
        assert result["total"] == expected_total(), (workflow_id, result)
        assert sorted(result["applied"]) == sorted(expected_names()), (workflow_id, result["applied"])
        updates = collections.Counter((e.event_type, _update_id(e)) for e in history if "UPDATE" in e.event_type)
        assert set(updates.values()) == {1} and len(updates) == 2 * UPDATES_EACH, (workflow_id, updates)
        signals = [e for e in history if e.event_type == "WORKFLOW_EXECUTION_SIGNALED"]
        assert len(signals) == SIGNALS_EACH + 1, (workflow_id, len(signals))
        got = answers[workflow_id]
        assert got == sorted(set(got)) and len(got) == UPDATES_EACH, (workflow_id, got)
    print(f"\n{COUNT} workflows, {UPDATES_EACH} updates and {SIGNALS_EACH + 1} signals each, "
          f"{KILLS_EACH} kills of the engine and of each worker ((sent, done) at each kill: {kills}); "
          f"all applied once in {time.monotonic() - began:.1f} s; requests sent again: {len(give_ups)} "
          f"{give_ups[:3]}")


def _after_start(starter: Starter, workflow_id: str, client: SyncClient, give_ups: list[str]) -> list[int]:
    """Once the workflow's start was answered, send it everything."""
    index = starter.workflow_ids.index(workflow_id)
    starter.futures[index].result(timeout=300)
    return send_all(client, workflow_id, give_ups, pause_s=PAUSE_S)


def _update_id(event) -> str:
    a = event.attributes
    return a.get("protocol_instance_id") or a.get("update_id") or ""
