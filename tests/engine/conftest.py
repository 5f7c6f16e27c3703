"""Fixtures of the processor tests."""

from __future__ import annotations

import pytest

from tests.engine.workflow_driver import WorkflowDriver


@pytest.fixture
def d(request, tmp_path):
    """A workflow driver on a fresh partition, with the test module's DRIVER_OPTIONS if it
    has them (e.g. its own limits or start time); the module's DRIVER class if it names one
    (e.g. `ScheduleDriver`)."""
    driver_class = getattr(request.module, "DRIVER", WorkflowDriver)
    driver = driver_class(tmp_path / "wf", **getattr(request.module, "DRIVER_OPTIONS", {}))
    yield driver
    driver.close()


@pytest.fixture
def running(d):
    """The key of run "w1", open and waiting on a one-hour timer, with no workflow task out."""
    key, _ = d.start()
    d.complete(key, [{"type": "START_TIMER", "timer_id": "1", "start_to_fire_timeout_ms": 3_600_000}])
    return key
