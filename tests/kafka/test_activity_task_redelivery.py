"""An activity task whose START never reached the engine is redelivered, not lost.

Until the engine accepts an attempt's START nothing in the engine times the attempt
out (there is no schedule-to-start timeout unless one is set), so the task queue's offset
must not be committed past the task: a worker that goes away before its START is
answered leaves the task to the next worker of the queue. Here the engine is stopped
while worker A holds the task, so A's START stays unanswered; A leaves, and worker B
gets the same task.
"""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

import pytest
from confluent_kafka import Consumer, TopicPartition

from streamproc import activity
from streamproc.client import ActivityClient, Client
from streamproc.kafka.config import consumer_config
from streamproc.protocol import codec
from streamproc.protocol.records import ActivityIntent, ValueType
from streamproc.protocol.topics import Topics
from streamproc.settings import Settings
from streamproc.worker import ActivityWorker
from tests.support.engines import EngineThread
from tests.support.history import EventLog

pytestmark = pytest.mark.kafka

QUEUE = "redelivered"


@activity.defn
def never_runs_here() -> str:
    return "ran"


def _starts_on_the_log(bootstrap: str, topics: Topics, partitions: int, identity: str, timeout: float) -> list:
    """The ACTIVITY_TASK START commands `identity` sent, once there is one (read from the beginning)."""
    consumer = Consumer(consumer_config(bootstrap, f"{topics.namespace}.probe.{uuid.uuid4().hex}"))
    consumer.assign([TopicPartition(topics.commands, p, 0) for p in range(partitions)])
    found, deadline = [], time.monotonic() + timeout
    try:
        while not found:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no START from {identity!r} within {timeout} s")
            msg = consumer.poll(0.2)
            if msg is None or msg.error() is not None:
                continue
            record = codec.decode(msg.value(), msg.headers())
            if (record.value_type == ValueType.ACTIVITY_TASK and record.intent == ActivityIntent.START
                    and record.value["identity"] == identity):
                found.append(record)
    finally:
        consumer.close()
    return found


def _committed(bootstrap: str, topics: Topics, partitions: int) -> list[int]:
    consumer = Consumer(consumer_config(bootstrap, topics.worker_group(QUEUE)))
    try:
        tps = consumer.committed([TopicPartition(topics.tasks(QUEUE), p) for p in range(partitions)], timeout=30)
        return [tp.offset for tp in tps]
    finally:
        consumer.close()


def test_a_task_left_before_its_start_was_answered_goes_to_the_next_worker(bootstrap, namespace, tmp_path):
    settings = Settings(bootstrap=bootstrap, namespace=namespace, partitions=2, state_dir=tmp_path,
                        engine_id="redelivery")
    topics = Topics(namespace)
    events = EventLog(bootstrap, namespace)
    try:
        with EngineThread(settings, idle_poll_ms=10), Client(bootstrap, namespace) as client, \
                ActivityClient(client) as activities:
            activities.schedule_activity(never_runs_here, task_queue=QUEUE,
                                         start_to_close_timeout=timedelta(seconds=30))
            events.read_until(lambda e: e.count_value("ACTIVITY_TASK", "ActivityTaskScheduled") == 1, timeout=30)
        # The engine is gone: A's START will wait on the log, unanswered.
        worker_a = ActivityWorker(QUEUE, [never_runs_here], bootstrap=bootstrap, namespace=namespace, identity="a")
        with worker_a:
            (start_a,) = _starts_on_the_log(bootstrap, topics, 2, "a", timeout=60)
        assert worker_a.stats.started == 0
        assert max(_committed(bootstrap, topics, 2)) < 1, "the task was committed before its START was answered"

        with ActivityWorker(QUEUE, [never_runs_here], bootstrap=bootstrap, namespace=namespace, identity="b"):
            (start_b,) = _starts_on_the_log(bootstrap, topics, 2, "b", timeout=60)
        assert (start_b.key, start_b.value["attempt"]) == (start_a.key, start_a.value["attempt"]) == (start_a.key, 1)
    finally:
        events.close()
