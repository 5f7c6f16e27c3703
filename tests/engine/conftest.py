"""Fixtures of the processor tests."""

from __future__ import annotations

import pytest

from tests.engine.workflow_driver import WorkflowDriver


@pytest.fixture
def d(tmp_path):
    """A workflow driver on a fresh partition (a test module may override it, e.g. with limits)."""
    driver = WorkflowDriver(tmp_path / "wf")
    yield driver
    driver.close()
