"""Fixtures of the processor tests."""

from __future__ import annotations

import pytest

from tests.engine.workflow_driver import WorkflowDriver


@pytest.fixture
def d(request, tmp_path):
    """A workflow driver on a fresh partition, with the test module's DRIVER_OPTIONS if it
    has them (e.g. its own limits or start time)."""
    driver = WorkflowDriver(tmp_path / "wf", **getattr(request.module, "DRIVER_OPTIONS", {}))
    yield driver
    driver.close()
