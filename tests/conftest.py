"""Fixtures shared by the suite: a real Kafka broker for the tests that need one.

The broker is the one named by STREAMPROC_BOOTSTRAP if it answers, else a local one
started for the session (and stopped after it). Each test gets its own namespace, so
tests never see each other's topics.
"""

from __future__ import annotations

import os
import uuid

import pytest


@pytest.fixture(scope="session")
def bootstrap() -> str:
    named = os.environ.get("STREAMPROC_BOOTSTRAP", "").strip()
    if named:  # the caller (e.g. .ci/run) runs the broker
        yield named
        return
    from streamproc.devenv.broker import ensure_broker

    address, broker = ensure_broker()
    yield address
    if broker is not None:
        broker.stop()


@pytest.fixture
def namespace(request) -> str:
    name = request.node.name.split("[")[0].replace("_", "-")[:40]
    return f"t-{name}-{uuid.uuid4().hex[:6]}"
