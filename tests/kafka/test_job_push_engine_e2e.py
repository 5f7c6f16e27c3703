"""Job push through a real engine and broker, with the commands a push worker sends: the
streams registered on each partition, jobs pushed to the replies partition (nothing on
tasks.<queue>), completed, and the streams unregistered."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from streamproc.client import Client
from streamproc.kafka.config import consumer_config
from streamproc.protocol import codec
from streamproc.protocol.partitioning import partition_for
from streamproc.protocol.records import JobStreamIntent, Record, ValueType
from streamproc.protocol.topics import Topics
from tests.support.engines import EngineThread
from tests.support.history import EventLog

pytestmark = pytest.mark.kafka
QUEUE = "pushed"
REPLY_PARTITION = 0


def _stream_command(intent: str, partition: int, **value) -> Record:
    return Record.command(ValueType.JOB_STREAM, intent, {"queue": QUEUE, "stream_id": "s1", **value},
                          request_id=f"{intent}-{partition}", reply_partition=REPLY_PARTITION)


def _replies(consumer: Consumer, wanted, timeout: float = 60) -> list[Record]:
    """Read the replies partition until `wanted(records)` holds."""
    records: list[Record] = []
    deadline = time.monotonic() + timeout
    while not wanted(records):
        if time.monotonic() > deadline:
            raise TimeoutError(f"replies so far: {[(r.intent, r.request_id) for r in records]}")
        for msg in consumer.consume(100, 0.2):
            if msg.error() is None:
                records.append(codec.decode(msg.value(), msg.headers()))
    return records


def test_jobs_are_pushed_to_a_registered_stream_and_its_credit_comes_back(bootstrap, namespace, tmp_path):
    topics = Topics(namespace)
    consumer = Consumer(consumer_config(bootstrap, f"{namespace}-replies-reader"))
    events = EventLog(bootstrap, namespace)
    with EngineThread.on(bootstrap, namespace, tmp_path / "state", "push"), Client(bootstrap, namespace) as client:
        consumer.assign([TopicPartition(topics.replies, REPLY_PARTITION, 0)])
        try:
            for p in (0, 1):
                client.send(_stream_command(JobStreamIntent.REGISTER, p, worker="w-1", credits=2), p)
            got = _replies(consumer, lambda rs: sum(r.intent == "REGISTERED" for r in rs) == 2)
            assert {r.partition_id for r in got} == {0, 1}
            routing = [f"job-{n}" for n in range(6)]
            for key in routing:
                client.create_job(QUEUE, {"n": key}, routing_key=key)
            on = [partition_for(key, 2) for key in routing]
            expected = min(2, on.count(0)) + min(2, on.count(1))  # 2 credits on each partition
            pushes = [r for r in _replies(consumer, lambda rs: sum(r.request_id.startswith("s1/") for r in rs) >= expected)
                      if r.request_id.startswith("s1/")]
            assert len(pushes) == expected
            for push in pushes:
                assert push.intent == "STARTED" and push.value["worker"] == "w-1"
                assert push.request_id == f"s1/{push.key}/{push.value['attempt']}"
                client.complete_job(push.key, push.value["attempt"], "done")
            # Each completion gives a credit back: the jobs that went to the topic meanwhile stay there,
            # and the next ones are pushed again.
            events.read_until(lambda e: e.count("COMPLETED") >= len(pushes), timeout=60)
            client.create_job(QUEUE, {"n": "after"}, routing_key="job-0")
            _replies(consumer, lambda rs: any(r.request_id.startswith("s1/") for r in rs))
            for p in (0, 1):
                client.send(_stream_command(JobStreamIntent.UNREGISTER, p), p)
            _replies(consumer, lambda rs: sum(r.intent == "UNREGISTERED" for r in rs) == 2)
            events.read_until(lambda e: e.count_value("JOB_STREAM", "UNREGISTERED") == 2, timeout=30)
            started = events.events(intent="STARTED")
            assert len(started) == len(pushes) + 1 and events.rejections() == []
        finally:
            consumer.close()
            events.close()
