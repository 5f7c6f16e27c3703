"""Issue 4's promise, end to end on a real broker: a command sequence that contradicts the
history fails the task as non-deterministic; the run stays open and recovers when fixed
code is deployed.

Three deployments of the workflow type "Shipment" (tests/support/shipment_workflows.py)
serve one task queue in turn against one engine with a manual clock: v1 starts a run and
parks it on a long sleep; the broken v2 fails the task after the timer; the fixed v2
replays v1's history and completes the run. Nothing waits for wall-clock time: each step
waits for what shows the previous one happened.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from streamproc.client import Client
from streamproc.clock import ManualClock
from streamproc.semantics.workflow_events import EventType
from streamproc.semantics.workflow_history import check_well_formed
from streamproc.semantics.workflow_ids import WorkflowExecutionStatus
from streamproc.worker import Worker
from streamproc.workflow.errors import NON_DETERMINISTIC_ERROR
from tests.support.engines import EngineThread
from tests.support.shipment_workflows import (
    ACTIVITIES,
    NAP,
    WORKFLOW_TYPE,
    ShipmentV1,
    ShipmentV2Broken,
    ShipmentV2Fixed,
)
from tests.support.polling import wait_for_event, wait_until

pytestmark = pytest.mark.kafka

QUEUE = "shipments"
#: More than any task attempt's timeout (10 s, plus at most 5 s x 2^(attempt-4) from attempt 4).
PAST_A_TASK_TIMEOUT = timedelta(minutes=5)


def deployment(client: Client, workflow_class: type, identity: str) -> Worker:
    return Worker(client, task_queue=QUEUE, workflows=[workflow_class], activities=ACTIVITIES,
                  identity=identity)


def history_of(handle) -> list[tuple[int, EventType, dict]]:
    return [(e["event_id"], EventType[e["event_type"]], e["attributes"]) for e in handle.fetch_history().events]


@pytest.fixture
def engine_and_client(bootstrap, namespace, tmp_path):
    clock = ManualClock()
    with EngineThread.on(bootstrap, namespace, tmp_path, "nondeterminism", clock=clock), Client(bootstrap, namespace) as client:
        yield clock, client


def test_incompatible_code_fails_the_task_the_run_stays_open_and_fixed_code_completes_it(engine_and_client):
    clock, client = engine_and_client
    with deployment(client, ShipmentV1, "v1") as v1:
        handle = client.start_workflow(WORKFLOW_TYPE, "o-1", id="shipment-1", task_queue=QUEUE)
        wait_for_event(client, "shipment-1", "TIMER_STARTED")
        v1.shutdown()
    parked = history_of(handle)

    with deployment(client, ShipmentV2Broken, "v2-broken") as broken:
        clock.advance(NAP + timedelta(milliseconds=1))
        failed = wait_for_event(client, "shipment-1", "WORKFLOW_TASK_FAILED")
        assert failed.attributes["cause"] == NON_DETERMINISTIC_ERROR
        assert failed.attributes["identity"] == "v2-broken"
        assert failed.attributes["failure"]["message"] == (
            "[TMPRL1100] Nondeterminism error: activity type of ActivityTaskScheduled(event_id=5, "
            "activity_type='pack', activity_id='1') does not match activity type of the command the "
            "workflow code now issues, ScheduleActivityTask(activity_type='label', activity_id='1')")
        stats = broken.workflow_worker.stats
        # Attempt 2 fails the same way and is left to time out: no answer, so no new
        # attempt until the clock passes its timeout (a reported failure would be retried
        # at once, and worker and engine would spin).
        wait_until(lambda: stats.unanswered == 1, what="attempt 2 never reached the broken worker")
        for attempt in (3, 4, 5):
            clock.advance(PAST_A_TASK_TIMEOUT)
            wait_until(lambda: stats.unanswered == attempt - 1, what=f"attempt {attempt} never came")
        assert (stats.failed, stats.completed) == (1, 0)
        # the run is open and its history ends with the one failure: attempts 2.. are transient
        assert handle.describe().status is WorkflowExecutionStatus.RUNNING
        history = history_of(handle)
        assert [t for _, t, _ in history] == [t for _, t, _ in parked] + [
            EventType.TIMER_FIRED, EventType.WORKFLOW_TASK_SCHEDULED, EventType.WORKFLOW_TASK_STARTED,
            EventType.WORKFLOW_TASK_FAILED]
        broken.shutdown()

    with deployment(client, ShipmentV2Fixed, "v2-fixed") as fixed:
        # attempt 5 went to the broken worker: its timeout sends attempt 6 to this one
        clock.advance(PAST_A_TASK_TIMEOUT)
        assert handle.result(60) == "shipped-parcel-o-1"
        assert fixed.workflow_worker.stats.failed == 0

        history = history_of(handle)
        assert check_well_formed(history) == []
        assert handle.describe().status is WorkflowExecutionStatus.COMPLETED
        types = [t for _, t, _ in history]
        assert types.count(EventType.WORKFLOW_TASK_FAILED) == 1
        assert EventType.MARKER_RECORDED not in types  # the run kept v1's path
        scheduled = [a for _, t, a in history if t is EventType.ACTIVITY_TASK_SCHEDULED]
        assert [a["activity_type"] for a in scheduled] == ["pack", "ship"]
        # the attempt that completed is written as it was shown: attempt 6, then Started, Completed
        recovered = types.index(EventType.WORKFLOW_TASK_FAILED) + 1
        assert types[recovered:recovered + 3] == [EventType.WORKFLOW_TASK_SCHEDULED, EventType.WORKFLOW_TASK_STARTED,
                                                  EventType.WORKFLOW_TASK_COMPLETED]
        assert history[recovered][2]["attempt"] == 6
        assert history[recovered + 2][2]["identity"] == "v2-fixed"

        # a run started on the fixed code takes the new path and records the patch
        fresh = client.start_workflow(WORKFLOW_TYPE, "o-2", id="shipment-2", task_queue=QUEUE)
        wait_for_event(client, "shipment-2", "TIMER_STARTED")
        clock.advance(NAP + timedelta(milliseconds=1))
        assert fresh.result(60) == "shipped-parcel-o-2"
        fresh_history = history_of(fresh)
        assert check_well_formed(fresh_history) == []
        assert [a["activity_type"] for _, t, a in fresh_history if t is EventType.ACTIVITY_TASK_SCHEDULED] == [
            "label", "pack", "ship"]
        assert EventType.MARKER_RECORDED in [t for _, t, _ in fresh_history]
