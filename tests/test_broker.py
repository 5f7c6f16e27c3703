"""LocalBroker against a real JVM: start, produce/consume, crash, recover, stop; and the parts
that need no JVM (the rendered configuration, the CLI of a broker that never ran).

The JVM tests use the default jar cache (downloaded once with Maven) and its own state directory and ports,
so it never touches a developer's broker.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from streamproc.devenv.broker import BrokerError, LocalBroker, broker_reachable
from streamproc.devenv.broker_choice import ensure_broker
from streamproc.devenv.broker_config import advertised_port, server_properties_file
from streamproc.devenv.broker_jvm import jvm_command
from streamproc.devenv.kraft_cluster import LocalCluster

needs_java = pytest.mark.skipif(shutil.which("java") is None and not os.environ.get("JAVA_HOME"),
                                reason="needs a Java 17+ runtime")


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=15)[name].result(timeout=15)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        t = admin.list_topics(name, timeout=5).topics.get(name)
        if t and t.error is None and len(t.partitions) == partitions and \
                all(p.leader >= 0 for p in t.partitions.values()):
            return
        time.sleep(0.1)
    raise AssertionError(f"topic {name} has no leaders")


def _consume_all(bootstrap: str, topic: str, expected: int, timeout: float = 30.0) -> list[tuple[bytes, bytes]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex[:8]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "fetch.wait.max.ms": 10})
    got = []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + timeout
        while len(got) < expected and time.monotonic() < deadline:
            for m in c.consume(500, 0.5):
                assert m.error() is None, m.error()
                got.append((m.key(), m.value()))
    finally:
        c.close()
    return got


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "streamproc.devenv.broker", *args],
                          capture_output=True, text=True, timeout=60)


def test_server_properties_are_escaped_for_the_jvm_and_name_the_client_port(tmp_path):
    broker = LocalBroker(port=29092, controller_port=29093, state_dir=tmp_path / "kafka \u00fc",
                         extra_properties={"auto.create.topics.enable": True, "log.retention.ms": 60000})
    props = broker.server_properties()
    assert props["auto.create.topics.enable"] == "true"  # extra properties win, in Java's spelling
    assert props["log.retention.ms"] == "60000"
    text = server_properties_file(props)
    assert text.isascii() and "kafka \\u00FC" in text
    assert advertised_port(text) == 29092


def test_only_a_single_replica_is_elected_uncleanly(tmp_path):
    """One node: its only replica leads again whatever the controller's ELR says (nothing to
    lose); a cluster with replicas keeps Kafka's clean elections."""
    single = LocalBroker(port=29092, controller_port=29093, state_dir=tmp_path / "single").server_properties()
    assert single["unclean.leader.election.enable"] == "true"
    for nodes, unclean in ((1, "true"), (3, "false")):
        cluster = LocalCluster(nodes=nodes, base_port=29460, state_dir=tmp_path / f"cluster-{nodes}")
        assert {b.server_properties()["unclean.leader.election.enable"] for b in cluster.brokers.values()} == {unclean}


def test_jvm_options_from_the_environment_come_after_the_projects_own(tmp_path, monkeypatch):
    monkeypatch.setenv("STREAMPROC_BROKER_JVM_OPTS", "-XX:TieredStopAtLevel=1 -Dx='a b'")
    command = jvm_command("java", "kafka.Kafka", ["server.properties"], kafka_version="4.1.1", heap="-Xmx1g",
                          log_config=tmp_path / "log4j2.properties", logs_dir=tmp_path, lib_dir=tmp_path)
    assert command.index("-XX:TieredStopAtLevel=1") > command.index("-XX:+UseG1GC")
    assert "-Dx=a b" in command and command.index("-Dx=a b") < command.index("kafka.Kafka")


def test_cli_status_of_a_broker_that_never_ran(tmp_path):
    state = tmp_path / "kafka"
    res = _cli("status", "--port", "29092", "--dir", str(state))
    assert res.returncode == 3 and "not running" in res.stdout, res.stderr
    assert not state.exists()  # asking does not create anything


@pytest.mark.kafka
@needs_java
def test_port_taken_by_another_process_is_a_clear_error(tmp_path):
    (cport,) = _free_ports(1)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        broker = LocalBroker(port=port, controller_port=cport, state_dir=tmp_path / "kafka")
        with pytest.raises(BrokerError, match=f"port 127.0.0.1:{port} is already in use"):
            broker.start(timeout=10)
    assert not broker.is_running()


@pytest.mark.kafka
@needs_java
@pytest.mark.timeout(180)
def test_lifecycle_with_crash_and_recovery(tmp_path, monkeypatch):
    port, cport = _free_ports(2)
    state = tmp_path / "kafka"
    broker = LocalBroker(port=port, controller_port=cport, state_dir=state, heap="-Xms128m -Xmx512m")
    try:
        bootstrap = broker.start(timeout=90)
        assert bootstrap == f"127.0.0.1:{port}"
        assert broker.launched
        st = broker.status()
        assert st["running"] and st["bootstrap"] == bootstrap
        assert st["pid"] > 0 and st["rss"] > 10 * 2**20
        first_pid = st["pid"]
        assert (state / "data" / "meta.properties").is_file()
        assert "KafkaConfig values" in broker.log_tail(2000)

        # already running: returns at once, from this object or another one for the same dir
        t0 = time.monotonic()
        assert LocalBroker(port=port, controller_port=cport, state_dir=state).start() == bootstrap
        assert time.monotonic() - t0 < 5
        # ... but not for the same state directory on another port
        with pytest.raises(BrokerError, match="already runs on port"):
            LocalBroker(port=_free_ports(1)[0], state_dir=state).start()

        monkeypatch.setenv("STREAMPROC_BOOTSTRAP", bootstrap)
        assert ensure_broker() == (bootstrap, None)

        # the CLI sees it
        res = _cli("status", "--json", "--port", str(port), "--dir", str(state))
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["pid"] == first_pid

        # plain and transactional writes (transaction state log with RF 1 must work)
        topic = f"lifecycle-{uuid.uuid4().hex[:6]}"
        _create_topic(bootstrap, topic, 3)
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
        for i in range(300):
            p.produce(topic, key=f"k{i % 7}".encode(), value=f"v{i}".encode())
        assert p.flush(30) == 0
        tp = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{topic}"})
        tp.init_transactions(30)
        tp.begin_transaction()
        for i in range(20):
            tp.produce(topic, key=b"tx", value=f"t{i}".encode())
        tp.commit_transaction(30)
        tp.begin_transaction()
        tp.produce(topic, key=b"tx", value=b"aborted")
        tp.abort_transaction(30)
        expected = sorted([(f"k{i % 7}".encode(), f"v{i}".encode()) for i in range(300)]
                          + [(b"tx", f"t{i}".encode()) for i in range(20)])
        assert sorted(_consume_all(bootstrap, topic, len(expected))) == expected
        del p, tp

        # crash: SIGKILL, data kept; start() recovers
        assert broker.kill()
        assert not broker.is_running()
        assert not broker.status()["running"]
        with pytest.raises(ProcessLookupError):
            os.kill(first_pid, 0)
        assert broker.start(timeout=90) == bootstrap
        assert broker.status()["pid"] != first_pid
        assert sorted(_consume_all(bootstrap, topic, len(expected))) == expected

        # controlled shutdown
        assert broker.stop()
        st = broker.status()
        assert not st["running"] and st["pid"] is None and st["rss"] is None
        assert not broker.is_running()
        assert not broker_reachable(bootstrap, timeout=2)
        assert broker.stop() is False  # nothing left to stop
        res = _cli("status", "--port", str(port), "--dir", str(state))
        assert res.returncode == 3 and "not running" in res.stdout

        broker.reset()
        assert not (state / "data").exists()
    finally:
        broker.kill()
