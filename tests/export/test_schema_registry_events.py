"""Events in the Schema Registry wire format, read by a plain `AvroDeserializer`.

An engine configured with a real registry (Apicurio, Confluent's API) registers the events
schema once under `<events topic>-value` with compatibility BACKWARD, and frames every event
with its id; a consumer that knows nothing of streamproc reads each one, and streamproc's own
readers still decode them.
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import timedelta

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from streamproc.client import ActivityClient, Client
from streamproc.export.event_schema import record_schema_text
from streamproc.export.schema_registry import event_framing, subject_name
from streamproc.kafka.errors import StartRefused
from streamproc.protocol import codec
from streamproc.protocol.records import Record, RecordType
from streamproc.protocol.registry_framing import FRAMED_CONTENT_TYPE, frame_prefix
from streamproc.settings import Settings
from tests.support.engines import EngineThread
from tests.support.history import EventLog

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]


def read_to_end(bootstrap: str, topic: str, timeout: float = 30) -> list:
    """Every committed message of `topic`, as a plain read_committed consumer sees it."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"plain-{uuid.uuid4().hex}",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        messages, deadline = [], time.monotonic() + timeout
        done = {p for p, end in ends.items() if end == 0}
        while len(done) < len(ends):
            assert time.monotonic() < deadline, f"not at the end of {topic} within {timeout} s"
            for msg in consumer.consume(500, 0.5):
                if msg.error() is None:
                    messages.append(msg)
            # Transaction markers take offsets too: a partition is done once its position is past its end.
            done |= {tp.partition for tp in consumer.position([TopicPartition(topic, p) for p in ends])
                     if tp.offset >= ends[tp.partition]}
        return messages
    finally:
        consumer.close()


def test_a_plain_avro_deserializer_reads_every_event(bootstrap, namespace, schema_registry, tmp_path):
    registry = SchemaRegistryClient({"url": schema_registry.url})
    settings = Settings(bootstrap=bootstrap, namespace=namespace, partitions=2, state_dir=tmp_path,
                        engine_id="registry-engine", schema_registry_url=schema_registry.url)
    events = EventLog(bootstrap, namespace)
    with EngineThread(settings, idle_poll_ms=10) as engine, Client(bootstrap, namespace) as client, \
            ActivityClient(client) as activities:
        subject = subject_name(engine.topics.events)
        created = [client.create_job("reports", {"n": n}) for n in range(3)]
        client.update_job_retries(12345, 1)  # no such job: a rejection, on the events topic too
        handle = activities.schedule_activity("summarise", "q3", task_queue="nobody-listens",
                                              schedule_to_close_timeout=timedelta(seconds=1))
        client.flush()
        events.read_until(lambda log: len(log.events("JOB", "CREATED")) == 3 and log.rejections(), timeout=30)
        client.cancel_job(events.events("JOB", "CREATED")[0].key)
        client.flush()
        handle.close_event(timeout=30)  # ActivityTaskTimedOut, with a failure record
        events.read_until(lambda log: log.events("JOB", "CANCELED"), timeout=30)
        events.read_to_end(30)

    messages = read_to_end(bootstrap, f"{namespace}.events")
    schema_id = registry.lookup_schema(subject, Schema(record_schema_text(), "AVRO")).schema_id
    deserialize = AvroDeserializer(registry)
    read = []
    for msg in messages:
        value, headers = msg.value(), msg.headers()
        assert value[0] == 0 and int.from_bytes(value[1:5], "big") == schema_id
        assert dict(headers)["content-type"] == FRAMED_CONTENT_TYPE
        plain = deserialize(value, SerializationContext(msg.topic(), MessageField.VALUE, headers))
        ours = codec.decode(value, headers)  # streamproc's readers still decode framed records
        field = codec.VALUE_FIELDS.get(plain["value_type"])
        assert (plain["record_type"], plain["intent"], plain["key"]) == (ours.record_type.value, ours.intent, ours.key)
        assert (plain[field] if field else None) == ours.value
        read.append(plain)

    assert len(read) == len(events.records)
    seen = {(r["value_type"], r["intent"]) for r in read}
    assert {("JOB", "CREATED"), ("JOB", "CANCELED"), ("ACTIVITY_TASK", "ActivityTaskScheduled"),
            ("ACTIVITY_TASK", "ActivityTaskTimedOut")} <= seen
    assert sorted(r["request_id"] for r in read if r["intent"] == "CREATED") == sorted(created)
    timed_out = next(r for r in read if r["intent"] == "ActivityTaskTimedOut")["activity_task"]
    assert timed_out["failure"]["timeout_type"] == "SCHEDULE_TO_START"  # a nested record, read too
    assert any(r["record_type"] == RecordType.COMMAND_REJECTION.value for r in read)

    # Registered once, BACKWARD: another start finds the schema; the registry refuses an
    # incompatible change (a field without a default).
    assert event_framing(schema_registry.url, f"{namespace}.events").schema_id == schema_id
    assert registry.get_versions(subject) == [1]
    assert registry.get_compatibility(subject) == "BACKWARD"
    changed = json.loads(record_schema_text())
    changed["fields"].append({"name": "tenant", "type": "string"})
    with pytest.raises(SchemaRegistryError) as refused:
        registry.register_schema(subject, Schema(json.dumps(changed), "AVRO"))
    assert refused.value.http_status_code == 409
    assert registry.get_versions(subject) == [1]


def test_a_registry_that_does_not_answer_stops_the_start_with_one_line():
    url = "http://127.0.0.1:9/apis/ccompat/v7"  # the discard port: nothing listens
    started = time.monotonic()
    with pytest.raises(StartRefused) as refused:
        event_framing(url, "nowhere.events", wait_s=1)
    assert time.monotonic() - started < 20
    message = str(refused.value)
    assert message.startswith(f"schema registry {url} did not answer within 1 s:") and "\n" not in message


def test_framed_records_decode_and_a_bad_frame_is_named():
    record = codec.decode(codec.encode(Record.command("JOB", "CREATE", {"type": "q", "payload": "{}"}, request_id="r")))
    framed = [("content-type", FRAMED_CONTENT_TYPE)]
    body = codec.encode(record)
    assert codec.decode(frame_prefix(7) + body, framed) == record
    assert codec.decode(body, codec.AVRO_HEADERS) == record  # without a registry: as before
    with pytest.raises(codec.DecodeError, match="starts with magic byte 0, got 1"):
        codec.decode(b"\x01" + frame_prefix(7)[1:] + body, framed)
    with pytest.raises(codec.DecodeError, match="needs 5 header bytes, got 3"):
        codec.decode(b"\x00\x00\x01", framed)


def test_the_registry_url_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv("STREAMPROC_SCHEMA_REGISTRY_URL", raising=False)
    assert Settings.from_env().schema_registry_url == ""
    monkeypatch.setenv("STREAMPROC_SCHEMA_REGISTRY_URL", "http://registry:8081")
    assert Settings.from_env().schema_registry_url == "http://registry:8081"
