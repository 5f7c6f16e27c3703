"""The engine and a worker over TLS with SCRAM-SHA-512 logins, configured by nothing but
`STREAMPROC_KAFKA_*` variables, as against Confluent Cloud, MSK or Aiven.

The test starts its own broker (free ports, its own state directory) with an extra SASL_SSL
listener and a SCRAM user, and uses only that listener. Wrong credentials stop the engine at
start with one line saying so, instead of a silent retry loop.
"""

from __future__ import annotations

import socket
import time

import orjson
import pytest

from streamproc.client import Client
from streamproc.devenv.broker import LocalBroker
from streamproc.devenv.broker_security import SaslSslListener
from tests.support.engines import engine_process, worker_process
from tests.support.history import EventLog
from tests.support.tls_certificates import make_certificates

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(240)]

USER, PASSWORD = "streamproc-app", "s3cret-pass"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _variables(properties: dict[str, str]) -> dict[str, str]:
    return {"STREAMPROC_KAFKA_" + name.upper().replace(".", "_"): value for name, value in properties.items()}


@pytest.fixture(scope="module")
def secured_broker(tmp_path_factory):
    """A broker of this test's own, and the client variables of its SASL_SSL listener."""
    directory = tmp_path_factory.mktemp("secured-broker")
    tls = make_certificates(directory)
    listener = SaslSslListener(_free_port(), tls.certificate_chain, tls.private_key, USER, PASSWORD)
    broker = LocalBroker(port=_free_port(), controller_port=_free_port(), state_dir=directory / "kafka",
                         heap="-Xms256m -Xmx512m", sasl_ssl=listener)
    broker.start(timeout=120)
    try:
        properties = listener.client_properties(str(tls.ca_file))
        bootstrap = properties.pop("bootstrap.servers")
        yield bootstrap, _variables(properties)
    finally:
        broker.stop()


def test_engine_and_worker_run_over_sasl_ssl(secured_broker, tmp_path, monkeypatch):
    bootstrap, variables = secured_broker
    for name, value in variables.items():
        monkeypatch.setenv(name, value)  # this process's client and event reader
    namespace = "secured"
    engine = engine_process(bootstrap, namespace, "secured-engine", tmp_path / "state", tmp_path, partitions=2)
    worker = worker_process(bootstrap, namespace, "secured-jobs", "secured-worker", tmp_path)
    engine.env.update(variables)
    worker.env.update(variables)
    engine.start()
    try:
        engine.wait_for_log("partitions_assigned", timeout=90)
        worker.start()
        with Client(bootstrap, namespace) as client:
            requests = [client.create_job("secured-jobs", {"n": i}, request_id=f"job-{i}") for i in range(5)]
            client.flush()
        events = EventLog(bootstrap, namespace)
        events.read_until(lambda log: len(log.events("JOB", "COMPLETED")) >= 5, timeout=90)
        created = {r.request_id: r.key for r in events.events("JOB", "CREATED")}
        assert set(created) == set(requests)
        results = {r.key: r.value["result"] for r in events.events("JOB", "COMPLETED")}
        assert results == {created[f"job-{i}"]: orjson.dumps({"n": 2 * i}).decode() for i in range(5)}
        assert events.rejections() == []
    finally:
        worker.stop()
        engine.stop()


@pytest.mark.parametrize("role", ["engine", "worker"])
def test_wrong_credentials_stop_a_process_with_one_clear_line(secured_broker, tmp_path, role):
    bootstrap, variables = secured_broker
    process = (engine_process(bootstrap, "secured-wrong", "wrong-engine", tmp_path / "state", tmp_path)
               if role == "engine" else worker_process(bootstrap, "secured-wrong", "jobs", "wrong-worker", tmp_path))
    process.env.update(variables, STREAMPROC_KAFKA_SASL_PASSWORD="not-the-password", STREAMPROC_LOG_FORMAT="console")
    started = time.monotonic()
    code = process.start().wait_exit(60)
    elapsed = time.monotonic() - started
    text = process.log_text()
    assert code == 1, text
    assert elapsed < 30, elapsed
    assert "Traceback" not in text
    last = text.strip().splitlines()[-1]
    assert last.startswith(f"Error: Kafka at {bootstrap} refused the connection:"), last
    assert "Authentication failed" in last and "check sasl.username, sasl.password" in last, last
