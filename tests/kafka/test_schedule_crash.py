"""200 schedules firing every second while the engine is SIGKILLed 3 times.

Each schedule has an interval of 1 s bounded by a start and end time (15 action times), a
catch-up window of a year and ALLOW_ALL, so every action time after the schedule's creation
must start exactly one workflow however the kills fall: times that came due while the engine was down are taken
when it is back. The workflow ids (`<base>-<nominal time>`) prove it: from the events
topic, every (schedule, second) has exactly one WORKFLOW_EXECUTION_STARTED, and there is
no other.
"""

from __future__ import annotations

import collections
import random
import time
from datetime import datetime, timedelta, timezone

import pytest

from streamproc.client import Client
from tests.support.crash_workflow_checks import start_processes
from tests.support.engines import engine_process
from tests.support.history import EventLog
from tests.support.tick_schedules import create_tick_schedules, started_workflow_ids, tick_workflow_ids

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

SCHEDULES = 200
ACTIONS = 15
KILLS = 3


def test_no_action_is_lost_or_taken_twice_while_the_engine_is_sigkilled(bootstrap, namespace, tmp_path):
    rng = random.Random(20261125)
    engine = engine_process(bootstrap, namespace, "schedules-crashy", tmp_path / "state", tmp_path)
    events = EventLog(bootstrap, namespace)
    try:
        start_processes(engine, [])
        with Client(bootstrap, namespace) as client:
            # The first action time leaves room to create every schedule before it.
            first = datetime.fromtimestamp(int(time.time()) + 15, tz=timezone.utc)
            last = first + timedelta(seconds=ACTIONS - 1)
            create_tick_schedules(client, "tick", SCHEDULES, first, last, run_timeout=timedelta(seconds=60))
        time.sleep(max(0.0, first.timestamp() - time.time()))
        for _ in range(KILLS):
            time.sleep(rng.uniform(0.5, 3.0))
            assert engine.alive(), f"the engine died by itself:\n{engine.log_text()[-3000:]}"
            engine.kill()
            mark = len(engine.log_text())
            engine.start()
            engine.wait_for_log("partitions_assigned", since=mark)
        events.read_until(lambda log: len(log.events("SCHEDULE", "CREATED")) >= SCHEDULES, timeout=60)
        expected = _action_times(events, first)
        # A loaded machine may create some schedules after `first`: their earlier times are
        # not theirs (never before the creation), but most must be left to check.
        assert len(expected) > SCHEDULES * ACTIONS // 2, f"only {len(expected)} action times after the creations"
        try:  # late is not lost: wait as long as starts keep coming
            took = events.read_while_progressing(lambda log: len(set(started_workflow_ids(log))) >= len(expected),
                                                 lambda log: len(started_workflow_ids(log)), stalled_s=60)
        except TimeoutError:
            missing = sorted(expected - set(started_workflow_ids(events)))
            raise AssertionError(f"{len(missing)} actions never started, e.g. {missing[:5]}") from None
        print(f"{len(expected)} actions started {took:.1f} s after the last kill")
        engine.stop()
        events.read_to_end(timeout=60)
        counts = collections.Counter(started_workflow_ids(events))
        assert set(counts) == expected
        assert [w for w, n in counts.items() if n > 1] == []
        # ... and the schedules recorded each action once (TRIGGERs come from the checker:
        # their events have no source position to tell copies apart, the workflow id does).
        actions = collections.Counter(r.value["workflow_id"] for r in events.events("SCHEDULE", "ACTION_STARTED"))
        assert set(actions) == expected and max(actions.values()) == 1
    finally:
        engine.stop()
        events.close()


def _action_times(events: EventLog, first: datetime) -> set[str]:
    """The workflow ids of the schedules' action times after the second each was created in."""
    created_s = {r.value["schedule_id"]: r.timestamp_ms // 1000 for r in events.events("SCHEDULE", "CREATED")}
    return tick_workflow_ids("tick", SCHEDULES, first, first + timedelta(seconds=ACTIONS - 1), created_s)
