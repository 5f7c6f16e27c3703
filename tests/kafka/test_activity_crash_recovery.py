"""Activity timeouts and retries across engine crashes: nothing retried twice or lost.

Activities whose first attempt fails, or hangs until its start-to-close timeout, must
each close exactly once with attempt 2 and the right last failure, however often the
engine is SIGKILLed while their timers and backoffs are pending.
"""

from __future__ import annotations

import collections
import random
import time

import pytest

from streamproc.client import Client
from tests.support.engines import engine_process
from tests.support.history import EventLog
from tests.support.scripted_activities import ScriptedWorker, schedule

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

COUNT = 600


def behaviour(activity_id: str, attempt: int) -> str:
    kind = activity_id.split("-")[0]
    if attempt == 1 and kind in ("fail", "hang"):
        return kind
    return "complete"


def test_engine_sigkills_do_not_repeat_or_lose_activity_attempts(bootstrap, namespace, tmp_path):
    rng = random.Random(7)
    engine = engine_process(bootstrap, namespace, "acts", tmp_path / "state", tmp_path).start()
    events = EventLog(bootstrap, namespace)
    worker = None
    try:
        engine.wait_for_log("partitions_assigned")
        worker = ScriptedWorker(bootstrap, namespace, "scripted", behaviour).start()
        kinds = ["ok", "fail", "hang"]
        ids = [f"{kinds[i % 3]}-{i}" for i in range(COUNT)]
        policy = {"initial_interval_ms": 300, "backoff_coefficient": 2.0, "maximum_interval_ms": 0,
                  "maximum_attempts": 3, "non_retryable_error_types": []}
        with Client(bootstrap, namespace) as client:
            for n, activity_id in enumerate(ids):
                # Only "hang" attempts are meant to time out: a failing attempt gets room enough
                # that its FAIL, however late a loaded machine sends it, is what closes it.
                timeout_ms = 2000 if activity_id.startswith("hang") else 30_000
                schedule(client, activity_id, "scripted", start_to_close_timeout_ms=timeout_ms, retry_policy=policy)
                if n % 100 == 99:
                    client.flush()
                    time.sleep(0.3)
        for _ in range(5):
            time.sleep(rng.uniform(0.3, 1.5))
            engine.kill()
            mark = len(engine.log_text())
            engine.start()
            engine.wait_for_log("partitions_assigned", since=mark)
        closed = ("ActivityTaskCompleted", "ActivityTaskFailed", "ActivityTaskTimedOut", "ActivityTaskCanceled")
        events.read_until(lambda e: sum(e.count_value("ACTIVITY_TASK", c) for c in closed) >= COUNT, timeout=120)
        time.sleep(2)
        events.read_until(lambda e: True, timeout=1)

        acts = [r for r in events.events("ACTIVITY_TASK")]
        scheduled = collections.Counter(r.value["activity_id"] for r in acts if r.intent == "ActivityTaskScheduled")
        assert set(scheduled) == set(ids) and set(scheduled.values()) == {1}
        completed = {r.value["activity_id"]: r for r in acts if r.intent == "ActivityTaskCompleted"}
        assert set(completed) == set(ids), f"{len(set(ids) - set(completed))} activities did not complete"
        assert collections.Counter(r.value["activity_id"] for r in acts if r.intent == "ActivityTaskCompleted"
                                   ).most_common(1)[0][1] == 1
        started = {r.value["activity_id"]: r for r in acts if r.intent == "ActivityTaskStarted"}
        for activity_id in ids:
            kind = activity_id.split("-")[0]
            s = started[activity_id].value
            assert s["attempt"] == (1 if kind == "ok" else 2), (activity_id, s["attempt"])
            assert completed[activity_id].value["result"] == f'"{activity_id}@{s["attempt"]}"'
            if kind == "fail":
                assert s["last_failure"]["type"] == "Flaky"
            if kind == "hang":
                assert s["last_failure"]["timeout_type"] == "START_TO_CLOSE"
        assert events.duplicates() == []
        # Attempts the worker received: exactly one per attempt, never a retry too many.
        received = collections.Counter(worker.received)
        assert max(received.values()) == 1
        assert {a for (_, a) in received} == {1, 2}
    finally:
        if worker is not None:
            worker.stop()
        events.close()
        engine.stop()
