"""Command batches through a real broker: a burst of schedule actions larger than what the
engine processes between two commits (its `max_batch`, counting a batch's commands) is taken
in several steps, the rest read again, and every action starts its workflow exactly once."""

from __future__ import annotations

import collections
import time
from datetime import datetime, timezone

import pytest

from streamproc.client import Client
from tests.support.engines import EngineThread
from tests.support.history import EventLog
from tests.support.tick_schedules import create_tick_schedules, started_workflow_ids, tick_workflow_ids

pytestmark = pytest.mark.kafka

SCHEDULES = 150


def test_a_burst_larger_than_a_step_starts_each_workflow_once(bootstrap, namespace, tmp_path):
    events = EventLog(bootstrap, namespace)
    # 20 commands per step: the START batches (up to 150 starts each) are taken in parts.
    with EngineThread.on(bootstrap, namespace, tmp_path / "state", "batches", max_batch=20) as engine, \
            Client(bootstrap, namespace) as client:
        put_back, original = [], engine._session.put_back
        engine._session.put_back = lambda rest, commands: put_back.append(len(rest)) or original(rest, commands)
        at = datetime.fromtimestamp(int(time.time()) + 8, tz=timezone.utc)
        create_tick_schedules(client, "burst", SCHEDULES, at, at)  # one action each, all at `at`
        expected = tick_workflow_ids("burst", SCHEDULES, at, at)
        events.read_until(lambda log: set(started_workflow_ids(log)) >= expected, timeout=120)
        time.sleep(1)  # anything started twice would be there by now
        events.read_available()
        assert engine.stats.commands - SCHEDULES < 20  # the CREATEs, then a few BATCH records
        assert put_back  # some were read again
    events.close()
    counts = collections.Counter(started_workflow_ids(events))
    assert set(counts) == expected and max(counts.values()) == 1
    assert [r for r in events.records if r.rejection_type] == []
