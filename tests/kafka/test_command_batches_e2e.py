"""Command batches through a real broker: a burst of schedule actions larger than what the
engine processes between two commits (its `max_batch`, counting a batch's commands) is taken
in several steps, the rest read again, and every action starts its workflow exactly once.

The engine runs on a manual clock, moved to the action time once every schedule exists: a
schedule's first action is never before its creation (Temporal's), so on the wall clock a
loaded machine that took longer than the lead to create them all made the later schedules
fire nothing, and the test failed though nothing was lost (133 of 150 were seen created
after the action time, at a load of 9 on 2 cores)."""

from __future__ import annotations

import collections
import time
from datetime import datetime, timezone

import pytest

from streamproc.client import Client
from streamproc.clock import ManualClock
from tests.support.engines import EngineThread
from tests.support.history import EventLog
from tests.support.tick_schedules import create_tick_schedules, started_workflow_ids, tick_workflow_ids

pytestmark = pytest.mark.kafka

SCHEDULES = 150


def test_a_burst_larger_than_a_step_starts_each_workflow_once(bootstrap, namespace, tmp_path):
    events = EventLog(bootstrap, namespace)
    # 20 commands per step: the START batches (up to 150 starts each) are taken in parts.
    clock = ManualClock(int(time.time()) * 1000)
    with EngineThread.on(bootstrap, namespace, tmp_path / "state", "batches", max_batch=20, clock=clock) as engine, \
            Client(bootstrap, namespace) as client:
        put_back, original = [], engine._session.put_back
        engine._session.put_back = lambda rest, commands: put_back.append(len(rest)) or original(rest, commands)
        # The STARTs travel through the log, as to partitions of another engine: relayed
        # (`engine/relay.py`), they would be processed with their TRIGGERs, never read in parts.
        engine._relay.begin, engine._relay.relay = lambda processors, touched, budget: None, lambda touched: []
        at = datetime.fromtimestamp(clock.now_ms() // 1000 + 8, tz=timezone.utc)
        create_tick_schedules(client, "burst", SCHEDULES, at, at)  # one action each, all at `at`
        expected = tick_workflow_ids("burst", SCHEDULES, at, at)
        events.read_until(lambda log: len(log.events("SCHEDULE", "CREATED")) >= SCHEDULES, timeout=120)
        clock.set(int(at.timestamp() * 1000) + 500)
        # Late is not lost: wait as long as the starts keep coming.
        took = events.read_while_progressing(lambda log: set(started_workflow_ids(log)) >= expected,
                                             lambda log: len(started_workflow_ids(log)), stalled_s=30)
        print(f"{SCHEDULES} actions started in {took:.1f} s")
        time.sleep(1)  # anything started twice would be there by now
        events.read_available()
        assert engine.stats.commands - SCHEDULES < 20  # the CREATEs, then a few BATCH records
        assert put_back  # some were read again
    events.close()
    counts = collections.Counter(started_workflow_ids(events))
    assert set(counts) == expected and max(counts.values()) == 1
    assert [r for r in events.records if r.rejection_type] == []
