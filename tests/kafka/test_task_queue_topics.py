"""Task queue topics exist only for queues the operator allowed (STREAMPROC_TASK_QUEUES)."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient

from streamproc.client import Client
from streamproc.client.errors import InvalidArgument
from tests.support.engines import Process, _env
from tests.support.history import EventLog

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]


def test_a_refused_task_queue_gets_a_rejection_and_no_topic(bootstrap, namespace, tmp_path):
    env = _env(bootstrap, namespace, STREAMPROC_ENGINE_ID="tq-1", STREAMPROC_STATE_DIR=str(tmp_path / "state"),
               STREAMPROC_PARTITIONS="2", STREAMPROC_TASK_QUEUES="orders,payments-*")
    engine = Process(["engine", "run"], env, tmp_path / "engine.log").start()
    events = EventLog(bootstrap, namespace)
    try:
        engine.wait_for_log("partitions_assigned")
        with Client(bootstrap, namespace) as client:
            with pytest.raises(InvalidArgument, match="task queue 'made-up-wf' is not allowed on this engine"):
                client.start_workflow("Order", id="w-1", task_queue="made-up-wf", rpc_timeout=30)
            refused = client.create_job("made-up-job", {})
            allowed = client.create_job("payments-eu", {})
        events.read_until(lambda e: {r.request_id for r in e.records} >= {refused, allowed}, timeout=60)
        (rejection,) = [r for r in events.rejections() if r.request_id == refused]
        assert "task queue 'made-up-job' is not allowed" in rejection.rejection_reason
        topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
        ours = sorted(t for t in topics if t.startswith(f"{namespace}.") and "tasks" in t)
        assert ours == [f"{namespace}.tasks.payments-eu"]
    finally:
        events.close()
        engine.stop()
