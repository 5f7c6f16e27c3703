"""Local activities end to end on a real broker: the workflow worker runs them inside the
workflow task, so a one-step workflow costs two commands (START and one task completion)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from streamproc import activity, workflow
from streamproc.client import Client
from streamproc.clock import ManualClock
from streamproc.semantics.workflow_events import EventType
from streamproc.semantics.workflow_history import check_well_formed
from streamproc.settings import Settings
from streamproc.worker import Worker
from tests.support.engines import EngineThread

pytestmark = pytest.mark.kafka

QUEUE = "local-steps"


@activity.defn
def double(n: int) -> int:
    return 2 * n


@workflow.defn
class OneLocalStep:
    @workflow.run
    async def run(self, n: int) -> int:
        return await workflow.execute_local_activity(double, n, start_to_close_timeout=timedelta(seconds=10))


@workflow.defn
class TenLocalSteps:
    @workflow.run
    async def run(self, n: int) -> int:
        for _ in range(10):
            n = await workflow.execute_local_activity(double, n, start_to_close_timeout=timedelta(seconds=10))
        return n


@pytest.fixture
def client(bootstrap, namespace, tmp_path):
    settings = Settings(bootstrap=bootstrap, namespace=namespace, partitions=2, state_dir=tmp_path,
                        engine_id="local-activities")
    with EngineThread(settings, clock=ManualClock(), idle_poll_ms=10), Client(bootstrap, namespace) as client, \
            Worker(client, task_queue=QUEUE, workflows=[OneLocalStep, TenLocalSteps], identity="la-worker"):
        yield client


def test_a_one_step_local_activity_workflow_completes_with_one_task_and_a_marker(client):
    handle = client.start_workflow(OneLocalStep.run, 21, id="one-local", task_queue=QUEUE)
    assert handle.result(60) == 42
    events = handle.fetch_history().events
    assert [e["event_type"] for e in events] == [
        "WORKFLOW_EXECUTION_STARTED", "WORKFLOW_TASK_SCHEDULED", "WORKFLOW_TASK_STARTED",
        "WORKFLOW_TASK_COMPLETED", "MARKER_RECORDED", "WORKFLOW_EXECUTION_COMPLETED"]
    marker = events[4]["attributes"]
    assert marker["marker_name"] == "LocalActivity"
    assert (marker["details"]["activity_type"], marker["details"]["attempt"]) == ("double", 1)
    assert check_well_formed([(e["event_id"], EventType[e["event_type"]], e["attributes"]) for e in events]) == []


def test_ten_local_steps_complete_in_one_task(client):
    handle = client.start_workflow(TenLocalSteps.run, 1, id="ten-local", task_queue=QUEUE)
    assert handle.result(60) == 1024
    types = [e["event_type"] for e in handle.fetch_history().events]
    assert types.count("MARKER_RECORDED") == 10 and types.count("WORKFLOW_TASK_COMPLETED") == 1
