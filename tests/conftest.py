"""Fixtures shared by the suite: a real Kafka broker for the tests that need one.

The broker is the one named by STREAMPROC_BOOTSTRAP if it answers, else a local one
started for the session (and stopped after it). Each test gets its own namespace, so
tests never see each other's topics.
"""

from __future__ import annotations

import functools
import os
import uuid

import pytest


@pytest.fixture(scope="session")
def bootstrap() -> str:
    named = os.environ.get("STREAMPROC_BOOTSTRAP", "").strip()
    if named:  # the caller (e.g. .ci/run) runs the broker
        yield named
        return
    from streamproc.devenv.broker_choice import ensure_broker

    address, broker = ensure_broker()
    yield address
    if broker is not None and broker.launched:  # one found running is not ours to stop
        broker.stop()


@pytest.fixture
def namespace(request) -> str:
    name = request.node.name.split("[")[0].replace("_", "-")[:40]
    namespace = f"t-{name}-{uuid.uuid4().hex[:6]}"
    yield namespace
    if "bootstrap" in request.fixturenames:
        _delete_topics(request.getfixturevalue("bootstrap"), namespace)


@functools.cache
def _admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def _delete_topics(bootstrap: str, namespace: str) -> None:
    """Delete a finished test's topics: a broker that piles up thousands of partitions over
    a run spends its CPU on per-partition housekeeping, and later tests slow down."""
    admin = _admin(bootstrap)
    names = [t for t in admin.list_topics(timeout=10).topics if t.startswith(f"{namespace}.")]
    if names:
        for future in admin.delete_topics(names, operation_timeout=30).values():
            future.exception(30)  # a topic already gone (deleted by the test) is fine
