"""The local three-node KRaft cluster: it starts, topics get three replicas by default
(what the engine asks for with replication factor -1), and it keeps serving with a node
killed, which then rejoins."""

from __future__ import annotations

import shutil
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer

from streamproc.devenv.kraft_cluster import LocalCluster
from streamproc.kafka.admin import TopicAdmin
from streamproc.protocol.topics import Topics

pytestmark = pytest.mark.skipif(shutil.which("java") is None, reason="needs a Java 17+ runtime")


@pytest.fixture
def cluster(tmp_path):
    c = LocalCluster(nodes=3, base_port=29460, state_dir=tmp_path / "cluster")
    c.start()
    yield c
    c.kill()


def _isr(admin: TopicAdmin, topic: str) -> dict[int, list[int]]:
    """Partition → in-sync replicas; empty while the broker asked has no metadata of the topic
    yet (a new topic reaches each node's metadata cache a moment after it is created)."""
    md = admin._admin.list_topics(timeout=10).topics.get(topic)
    return {} if md is None or md.error is not None else {p: sorted(pm.isrs) for p, pm in md.partitions.items()}


def _wait_for_isr(admin: TopicAdmin, topic: str, expected: dict[int, list[int]], what: str) -> None:
    deadline = time.monotonic() + 60
    while (isr := _isr(admin, topic)) != expected:
        assert time.monotonic() < deadline, f"{what}: {isr}"
        time.sleep(0.5)


@pytest.mark.timeout(300)
def test_a_topic_has_three_replicas_and_survives_a_killed_node(cluster):
    admin = TopicAdmin(cluster.bootstrap, Topics("cluster"))
    topic = "cluster.check"
    admin.ensure({topic: (2, {})})
    _wait_for_isr(admin, topic, {0: [1, 2, 3], 1: [1, 2, 3]}, "the new topic has not three in-sync replicas")
    cluster.kill(2)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(20):
        producer.produce(topic, str(i).encode(), partition=i % 2)
    assert producer.flush(30) == 0  # acks=all with min.insync.replicas 2: two nodes are enough
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe([topic])
    got, deadline = [], time.monotonic() + 60
    while len(got) < 20 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(int(msg.value()))
    consumer.close()
    assert sorted(got) == list(range(20))
    cluster.start_node(2)
    _wait_for_isr(admin, topic, {0: [1, 2, 3], 1: [1, 2, 3]}, "node 2 did not rejoin the ISR")
