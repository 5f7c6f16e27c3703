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
from datetime import datetime, timedelta, timezone

import pytest

from streamproc.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
)
from streamproc.clock import ManualClock
from tests.support.engines import EngineThread
from tests.support.history import EventLog

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
        at = datetime.fromtimestamp(clock.now_ms() // 1000 + 8, tz=timezone.utc)
        for n in range(SCHEDULES):
            client.create_schedule(f"burst-{n:03d}", Schedule(
                action=ScheduleActionStartWorkflow("Tick", id=f"burst-{n:03d}", task_queue="ticks"),
                spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(seconds=1))], start_at=at,
                                  end_at=at),
                policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.ALLOW_ALL)))
        expected = {f"burst-{n:03d}-{at.strftime('%Y-%m-%dT%H:%M:%SZ')}" for n in range(SCHEDULES)}

        def started(log: EventLog) -> list[str]:
            return [r.value["workflow_id"] for r in log.events("WORKFLOW", "WORKFLOW_EXECUTION_STARTED")]

        events.read_until(lambda log: len(log.events("SCHEDULE", "CREATED")) >= SCHEDULES, timeout=120)
        clock.set(int(at.timestamp() * 1000) + 500)
        # Late is not lost: wait as long as the starts keep coming.
        took = events.read_while_progressing(lambda log: set(started(log)) >= expected,
                                             lambda log: len(started(log)), stalled_s=30)
        print(f"{SCHEDULES} actions started in {took:.1f} s")
        time.sleep(1)  # anything started twice would be there by now
        events.read_available()
        assert engine.stats.commands - SCHEDULES < 20  # the CREATEs, then a few BATCH records
        assert put_back  # some were read again
    events.close()
    counts = collections.Counter(started(events))
    assert set(counts) == expected and max(counts.values()) == 1
    assert [r for r in events.records if r.rejection_type] == []
