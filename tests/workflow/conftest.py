"""Fixtures of the SDK tests that run workflows on the processors: the processor tests' driver."""

from tests.engine.conftest import d  # noqa: F401 - the fixture `d`, a workflow driver on a fresh partition
