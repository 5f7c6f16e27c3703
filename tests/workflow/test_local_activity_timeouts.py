"""A local activity that runs a plain function past its start-to-close timeout: the
attempt times out while the function still runs (its thread cannot be stopped), the next
attempt is made, and the late result is dropped."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from streamproc import activity, workflow
from streamproc.workflow.replayer import Replayer
from tests.engine.workflow_driver import WorkflowDriver, attrs
from tests.workflow.test_local_activities import Worker, _result

UNBLOCK = threading.Event()


@pytest.fixture
def d(tmp_path):
    driver = WorkflowDriver(tmp_path / "wf")
    yield driver
    driver.close()


@activity.defn
def answer_late(n: int) -> int:
    UNBLOCK.wait(10)
    return n


@workflow.defn(name="Order")
class PlainTimesOut:
    @workflow.run
    async def run(self, n: int) -> list:
        try:
            return await workflow.execute_local_activity(
                answer_late, n, start_to_close_timeout=timedelta(milliseconds=100),
                retry_policy=workflow.RetryPolicy(initial_interval=timedelta(milliseconds=10), maximum_attempts=2))
        except workflow.ActivityError as e:
            return [e.retry_state.name, type(e.cause).__name__, e.cause.type.name]


def test_a_plain_function_past_start_to_close_times_out_and_its_late_result_is_dropped(d):
    UNBLOCK.clear()
    key, _ = d.start(input="[1]")
    try:
        outcome = Worker(d, PlainTimesOut, key).answer()
    finally:
        UNBLOCK.set()
    assert _result(d, key) == ["MAXIMUM_ATTEMPTS_REACHED", "TimeoutError", "START_TO_CLOSE"]
    (marker,) = attrs(d.check(key), "MARKER_RECORDED")
    assert marker["details"]["attempt"] == 2 and "result" not in marker["details"]
    assert [c["type"] for c in outcome.commands] == ["RECORD_MARKER", "COMPLETE_WORKFLOW_EXECUTION"]
    Replayer(workflows=[PlainTimesOut]).replay(d.check(key))
