"""A scripted activity worker speaking the raw protocol, for engine tests that must not
depend on the SDK: what it does with each attempt is decided by the activity id."""

from __future__ import annotations

import threading
import uuid

from confluent_kafka import Consumer

from streamproc.client import Client
from streamproc.kafka.admin import TopicAdmin
from streamproc.kafka.batching import consume_available
from streamproc.kafka.config import consumer_config
from streamproc.protocol import codec
from streamproc.protocol.partitioning import partition_for, partition_of_key
from streamproc.protocol.records import ActivityIntent, Record, ValueType
from streamproc.protocol.topics import Topics


def schedule(client: Client, activity_id: str, queue: str, **value) -> None:
    body = {"activity_id": activity_id, "activity_type": "scripted", "task_queue": queue,
            "input": "null", **value}
    client.send(Record.command(ValueType.ACTIVITY_TASK, ActivityIntent.SCHEDULE, body,
                               request_id=activity_id), partition_for(activity_id, client.partitions))


class ScriptedWorker:
    """Starts every attempt it receives; then `behaviour(activity_id, attempt)` says
    "complete", "fail" (retryable application error) or "hang" (never answers)."""

    def __init__(self, bootstrap: str, namespace: str, queue: str, behaviour) -> None:
        self.client = Client(bootstrap, namespace)
        self.behaviour = behaviour
        topics = Topics(namespace)
        topic = TopicAdmin(bootstrap, topics).ensure_task_queue(queue, self.client.partitions)
        self.consumer = Consumer(consumer_config(bootstrap, topics.worker_group(queue), **{
            "enable.auto.commit": True}))
        self.consumer.subscribe([topic])
        self.received: list[tuple[str, int]] = []
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> ScriptedWorker:
        self.thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            for msg in consume_available(self.consumer, 500, 0.1):
                if msg.error() is None:
                    self._handle(codec.decode(msg.value(), msg.headers()))
            self.client._producer.poll(0)

    def _handle(self, task: Record) -> None:
        v = task.value
        activity_id, attempt = v["activity_id"], v["attempt"]
        self.received.append((activity_id, attempt))
        partition = partition_of_key(task.key)
        send = lambda intent, **value: self.client.send(  # noqa: E731
            Record.command(ValueType.ACTIVITY_TASK, intent, {"attempt": attempt, **value}, key=task.key,
                           request_id=uuid.uuid4().hex), partition)
        send(ActivityIntent.START, identity="scripted")
        action = self.behaviour(activity_id, attempt)
        if action == "complete":
            send(ActivityIntent.COMPLETE, result=f'"{activity_id}@{attempt}"')
        elif action == "fail":
            send(ActivityIntent.FAIL, failure={"message": f"attempt {attempt} failed", "kind": "APPLICATION",
                                               "type": "Flaky", "non_retryable": False,
                                               "next_retry_delay_ms": -1})

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(10)
        self.consumer.close()
        self.client.flush()
