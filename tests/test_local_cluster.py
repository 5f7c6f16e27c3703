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
    md = admin._admin.list_topics(timeout=10).topics[topic]
    return {p: sorted(pm.isrs) for p, pm in md.partitions.items()}


@pytest.mark.timeout(300)
def test_a_topic_has_three_replicas_and_survives_a_killed_node(cluster):
    admin = TopicAdmin(cluster.bootstrap, Topics("cluster"))
    topic = "cluster.check"
    admin.ensure({topic: (2, {})})
    assert _isr(admin, topic) == {0: [1, 2, 3], 1: [1, 2, 3]}
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
    deadline = time.monotonic() + 60
    while _isr(admin, topic) != {0: [1, 2, 3], 1: [1, 2, 3]}:
        assert time.monotonic() < deadline, f"node 2 did not rejoin the ISR: {_isr(admin, topic)}"
        time.sleep(0.5)
