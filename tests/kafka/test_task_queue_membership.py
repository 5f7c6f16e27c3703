"""A task queue member left without partitions rejoins, then goes on with a new consumer.

Here the member is left out for an ordinary reason (another member holds the queue's only
partition); the steps are the same ones that get a worker whose consumer's group requests
are stuck after broker restarts back into its group. The clock is a manual one: the test
does not wait out the 30 s intervals.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from streamproc.kafka.config import consumer_config
from streamproc.worker.task_leases import OverdueAttempts, TaskQueueMembership

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]


def _poll_until(consumer: Consumer, condition, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        consumer.poll(0.1)


def test_a_member_without_partitions_rejoins_then_renews_its_consumer(bootstrap, namespace):
    topic, group = f"{namespace}.membership", f"{namespace}.membership-group"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)]).values():
        future.result(30)
    config = consumer_config(bootstrap, group, **{"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    holder = Consumer(config)
    holder.subscribe([topic])
    _poll_until(holder, holder.assignment, "the first member got no partition")

    made: list[Consumer] = []

    def new_consumer() -> Consumer:
        made.append(Consumer(config))
        return made[-1]

    now = [0.0]
    membership = TaskQueueMembership(new_consumer, OverdueAttempts(clock=lambda: now[0]),
                                     lambda c: c.subscribe([topic]), lambda c: 1, "membership", "w-2",
                                     clock=lambda: now[0])
    try:
        membership.join()
        first = membership.consumer
        _poll_until(first, lambda: first.memberid(), "the second member did not join")
        assert membership.may_take_tasks() and not first.assignment()

        now[0] += 31  # 30 s without a partition: subscribe again, same consumer
        assert membership.may_take_tasks()
        assert membership.consumer is first and len(made) == 1

        now[0] += 31  # and that brought none either: a new consumer
        assert membership.may_take_tasks()
        assert membership.consumer is not first and len(made) == 2
        renewed = membership.consumer
        _poll_until(renewed, lambda: renewed.memberid(), "the new consumer did not join the group")

        holder.close()  # the partition is free: the new consumer gets it
        _poll_until(renewed, renewed.assignment, "the renewed consumer got no partition")
        now[0] += 31
        assert membership.may_take_tasks() and membership.consumer is renewed  # assigned: nothing to do
    finally:
        for consumer in made:
            try:
                consumer.close()
            except RuntimeError:  # already closed by the membership
                pass
