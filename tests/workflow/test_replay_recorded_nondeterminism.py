"""The Replayer on a history the engine recorded (tests/kafka/test_workflow_nondeterminism_e2e.py):
a Shipment run started by v1, whose task after the timer the broken v2 failed as
non-deterministic (one WORKFLOW_TASK_FAILED), then completed by the patched v2 at attempt
6 (its transient Scheduled written when it completed). Pure: no broker, no engine.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from streamproc.activity.payloads import decode
from streamproc.workflow.errors import NonDeterminismError
from streamproc.workflow.replayer import Replayer
from tests.support.shipment_workflows import ShipmentV1, ShipmentV2Broken, ShipmentV2Fixed

RECORDED = Path(__file__).parent / "histories" / "shipment_recovered_from_nondeterminism.json"


@pytest.fixture(scope="module")
def events() -> list[dict]:
    return orjson.loads(RECORDED.read_bytes())


def event_index(events: list[dict], event_type: str, **attributes) -> int:
    return next(i for i, e in enumerate(events) if e["event_type"] == event_type
                and all(e["attributes"].get(k) == v for k, v in attributes.items()))


def test_the_recorded_history_is_a_failure_then_a_transient_attempt_that_completed(events):
    failed = event_index(events, "WORKFLOW_TASK_FAILED")
    assert events[failed]["attributes"]["cause"] == "NON_DETERMINISTIC_ERROR"
    assert [e["event_type"] for e in events[failed + 1:failed + 4]] == [
        "WORKFLOW_TASK_SCHEDULED", "WORKFLOW_TASK_STARTED", "WORKFLOW_TASK_COMPLETED"]
    assert events[failed + 1]["attributes"]["attempt"] == 6
    assert events[-1]["event_type"] == "WORKFLOW_EXECUTION_COMPLETED"


@pytest.mark.parametrize("workflow_class", [ShipmentV1, ShipmentV2Fixed])
def test_compatible_code_replays_the_whole_recorded_history(events, workflow_class):
    assert Replayer(workflows=[workflow_class]).replay(events).commands == []


def test_the_patched_code_answers_the_retried_task_as_it_was_answered(events):
    """Up to attempt 6's Scheduled: the commands are the ones recorded after it, no patch marker."""
    retried = event_index(events, "WORKFLOW_TASK_SCHEDULED", attempt=6)
    outcome = Replayer(workflows=[ShipmentV2Fixed]).replay(events[:retried + 1])
    assert [(c["type"], c["activity_type"]) for c in outcome.commands] == [("SCHEDULE_ACTIVITY_TASK", "ship")]
    recorded = events[retried + 3]
    assert recorded["event_type"] == "ACTIVITY_TASK_SCHEDULED"
    assert decode(recorded["attributes"]["input"]) == decode(outcome.commands[0]["input"]) == ["parcel-o-1"]


def test_the_broken_code_fails_the_replay_with_the_error_the_engine_recorded(events):
    recorded = events[event_index(events, "WORKFLOW_TASK_FAILED")]["attributes"]["failure"]["message"]
    with pytest.raises(NonDeterminismError) as raised:
        Replayer(workflows=[ShipmentV2Broken]).replay(events)
    assert str(raised.value) == recorded
