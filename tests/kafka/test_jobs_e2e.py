"""Jobs end to end on a real broker: engine, workers and clients as separate Kafka clients."""

from __future__ import annotations

import collections
import io
import json
import threading
import time
from datetime import timedelta
from pathlib import Path

import fastavro
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from streamproc.clock import ManualClock
from streamproc.client import Client
from streamproc.protocol.codec import SCHEMA_FILES
from streamproc.protocol.partitioning import partition_of_key
from streamproc.protocol.topics import Topics
from streamproc.settings import Settings
from streamproc.worker.job_worker import JobWorker
from tests.support.engines import EngineThread, engine_process, worker_process
from tests.support.history import EventLog

pytestmark = pytest.mark.kafka
ROOT = Path(__file__).parents[2]


def test_a_thousand_jobs_completed_once_by_two_worker_processes(bootstrap, namespace, tmp_path):
    engine = engine_process(bootstrap, namespace, "e2e-1", tmp_path / "state", tmp_path).start()
    workers = [worker_process(bootstrap, namespace, "orders", f"w{i}", tmp_path).start() for i in (1, 2)]
    events = EventLog(bootstrap, namespace)
    try:
        engine.wait_for_log("partitions_assigned")
        for w in workers:  # both in the queue's group before the work arrives
            w.wait_for_log("tasks_assigned")
        with Client(bootstrap, namespace) as client:
            request_ids = {client.create_job("orders", {"n": i}) for i in range(1000)}
        events.read_until(lambda e: e.count("COMPLETED") >= 1000, timeout=120)
        time.sleep(1)  # anything duplicated would arrive now
        events.read_until(lambda e: True, timeout=1)

        created = {e.request_id: e.key for e in events.events(intent="CREATED")}
        assert set(created) == request_ids
        completed = collections.Counter(e.key for e in events.events(intent="COMPLETED"))
        assert set(completed) == set(created.values()) and set(completed.values()) == {1}
        results = {e.key: json.loads(e.value["result"])["n"] for e in events.events(intent="COMPLETED")}
        payloads = {e.key: json.loads(e.value["payload"])["n"] for e in events.events(intent="CREATED")}
        assert all(results[k] == 2 * payloads[k] for k in results)
        by_worker = collections.Counter(e.value["worker"] for e in events.events(intent="COMPLETED"))
        assert set(by_worker) == {"w1", "w2"}, by_worker  # the queue's group split the work
        assert {partition_of_key(k) for k in created.values()} == {0, 1, 2, 3}
        assert events.duplicates() == [] and events.rejections() == []
    finally:
        events.close()
        for p in (engine, *workers):
            p.stop()


def test_engine_and_worker_name_themselves_to_the_broker(bootstrap, namespace, tmp_path):
    """`kafka-consumer-groups --describe` shows which engine and which worker owns what."""
    settings = Settings(bootstrap=bootstrap, namespace=namespace, partitions=2,
                        state_dir=tmp_path, engine_id="named-engine")
    worker = JobWorker("named", lambda job: None, bootstrap=bootstrap, namespace=namespace,
                       worker_id="named-worker")
    thread = threading.Thread(target=worker.run, daemon=True)
    with EngineThread(settings):
        thread.start()
        topics = Topics(namespace)
        groups = {topics.engine_group: "streamproc-engine-named-engine",
                  topics.worker_group("named"): "streamproc-worker-named-worker"}
        admin = AdminClient({"bootstrap.servers": bootstrap})
        deadline = time.monotonic() + 60
        while True:
            described = admin.describe_consumer_groups(list(groups))
            members = {g: [m.client_id for m in f.result(10).members] for g, f in described.items()}
            if all(members.values()) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        worker.stop()
        thread.join(30)
    assert members == {group: [name] for group, name in groups.items()}


def _started_consumer(bootstrap: str, topic: str, group: str) -> Consumer:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed"})
    c.subscribe([topic])
    return c


def test_a_silent_worker_times_out_and_its_late_complete_is_rejected(bootstrap, namespace, tmp_path):
    clock = ManualClock()
    settings = Settings(bootstrap=bootstrap, namespace=namespace, partitions=2,
                        state_dir=tmp_path, engine_id="timeout-engine")
    with EngineThread(settings, clock=clock, idle_poll_ms=10) as engine, \
            Client(bootstrap, namespace) as client:
        events = EventLog(bootstrap, namespace)
        client.create_job("slow", {"n": 1}, timeout=timedelta(seconds=30))
        client.flush()
        events.read_until(lambda e: e.count("CREATED") == 1, timeout=30)
        key = events.events(intent="CREATED")[0].key

        client.start_job(key, 1, "silent-worker")        # starts and never answers
        client.flush()
        events.read_until(lambda e: e.count("STARTED") == 1, timeout=30)
        clock.advance(timedelta(seconds=30))                 # at the deadline: not yet
        time.sleep(0.3)
        events.read_until(lambda e: True, timeout=0.3)
        assert events.count("TIMED_OUT") == 0
        clock.advance(timedelta(milliseconds=1))
        events.read_until(lambda e: e.count("TIMED_OUT") == 1, timeout=30)
        timed_out = events.events(intent="TIMED_OUT")[0]
        assert timed_out.value["worker"] == "silent-worker" and timed_out.value["retries"] == 3

        # the job is published again on its task queue for attempt 2; another worker takes it
        tasks = _started_consumer(bootstrap, Topics(namespace).tasks("slow"), namespace + "-probe")
        from streamproc.protocol import codec
        attempts = []
        deadline = time.monotonic() + 30
        while len(attempts) < 2 and time.monotonic() < deadline:
            attempts += [codec.decode(m.value()).value["attempt"] for m in tasks.consume(10, 0.2)
                         if m.error() is None]
        tasks.close()
        assert attempts == [1, 2]
        client.start_job(key, 2, "good-worker")
        client.complete_job(key, 1, {"late": True})          # the silent worker wakes up
        client.complete_job(key, 2, {"ok": True})
        client.flush()
        events.read_until(lambda e: e.count("COMPLETED") == 1 and e.rejections(), timeout=30)
        (rejection,) = events.rejections()
        assert rejection.intent == "COMPLETE" and rejection.rejection_type == "INVALID_STATE"
        assert "at attempt 1, but that attempt is over" in rejection.rejection_reason
        assert events.events(intent="COMPLETED")[0].value["worker"] == "good-worker"
        assert engine.stats.due_commands == 1
        events.close()


def test_bad_input_becomes_rejections_and_the_partition_keeps_going(bootstrap, namespace, tmp_path):
    settings = Settings(bootstrap=bootstrap, namespace=namespace, partitions=1,
                        state_dir=tmp_path, engine_id="bad-input")
    with EngineThread(settings), Client(bootstrap, namespace) as client:
        raw = Producer({"bootstrap.servers": bootstrap})
        commands = Topics(namespace).commands
        raw.produce(commands, b"\x00\x01 definitely not avro")
        raw.produce(commands, b'{"value_type": "JOB", "intent": "LAUNCH"}', headers=[("content-type", b"application/json")])
        raw.produce(commands, b"x" * 600_000)
        raw.produce(commands, b'{"value_type":"JOB","intent":"CREATE","job":{"type":"q","payload":"{}"}}',
                    headers=[("content-type", b"application/json")])
        raw.flush(10)
        client.create_job("q", {"after": "garbage"})
        events = EventLog(bootstrap, namespace)
        events.read_until(lambda e: e.count("CREATED") == 2, timeout=30)
        reasons = [(r.rejection_type, r.rejection_reason[:40]) for r in events.rejections()]
        assert [t for t, _ in reasons] == ["UNDECODABLE", "UNKNOWN_COMMAND", "EXCEEDED_SIZE"], reasons
        events.close()


def test_events_decode_with_a_plain_consumer_and_the_schema_files(bootstrap, namespace, tmp_path):
    settings = Settings(bootstrap=bootstrap, namespace=namespace, partitions=1,
                        state_dir=tmp_path, engine_id="plain-reader")
    with EngineThread(settings), Client(bootstrap, namespace) as client:
        client.create_job("analytics", {"x": 1})
        client.flush()
        named: dict = {}
        for name in SCHEMA_FILES:
            schema = fastavro.parse_schema(json.loads((ROOT / "schemas" / f"{name}.avsc").read_text()),
                                           named_schemas=named)
        consumer = _started_consumer(bootstrap, Topics(namespace).events, namespace + "-plain")
        decoded = []
        deadline = time.monotonic() + 30
        while not decoded and time.monotonic() < deadline:
            decoded += [fastavro.schemaless_reader(io.BytesIO(m.value()), schema)
                        for m in consumer.consume(10, 0.2) if m.error() is None]
        consumer.close()
        (event,) = decoded
        assert event["record_type"] == "EVENT" and event["intent"] == "CREATED"
        assert event["job"]["type"] == "analytics" and json.loads(event["job"]["payload"]) == {"x": 1}
