"""A task queue member whose consumer does not settle in the group subscribes again, then
goes on with a new consumer; a member settled in the group without partitions is left alone.

The unsettled consumer here is one whose group coordinator cannot be reached (it was given
a port where nothing listens): its statistics say it never got into the group, as the
consumer stuck after broker restarts did. The clock is a manual one.
"""

from __future__ import annotations

import socket
import time

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from streamproc.kafka.config import consumer_config
from streamproc.worker.task_leases import OverdueAttempts
from streamproc.worker.task_queue_membership import STATS_INTERVAL_MS, TaskQueueMembership

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]


def _poll_until(consumer_of, condition, what: str, timeout: float = 30) -> None:
    """Poll the consumer `consumer_of()` returns (it may be renewed) until `condition()`."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        consumer_of().poll(0.1)


def _membership(config: dict, topic: str, now: list[float], made: list[Consumer]) -> TaskQueueMembership:
    def make(conf: dict) -> Consumer:
        made.append(Consumer(conf))
        return made[-1]
    return TaskQueueMembership(config, OverdueAttempts(clock=lambda: now[0]), lambda c: c.subscribe([topic]),
                               lambda c: 1, "membership", "w-2", clock=lambda: now[0], make_consumer=make,
                               unsettled_rejoin_s=10)


def _close_all(made: list[Consumer]) -> None:
    for consumer in made:
        try:
            consumer.close()
        except RuntimeError:  # already closed by the membership
            pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def unreachable():
    """A member joined to a group whose coordinator cannot be reached, once its statistics
    came: (membership, its first consumer, the manual clock, the consumers made)."""
    config = consumer_config(f"127.0.0.1:{_free_port()}", "membership-group")
    now, made = [0.0], []
    membership = _membership(config, "membership", now, made)
    try:
        membership.join()
        first = membership.consumer
        _poll_until(lambda: first, lambda: membership.standing.state is not None, "no statistics came",
                    timeout=5 * STATS_INTERVAL_MS / 1000)
        yield membership, first, now, made
    finally:
        _close_all(made)


def test_a_member_out_of_its_group_rejoins_then_renews_its_consumer(unreachable):
    membership, first, now, made = unreachable
    assert not membership.standing.settled()
    assert membership.may_take_tasks() and membership.consumer is first
    now[0] += 9.9
    assert membership.may_take_tasks() and membership.consumer is first and len(made) == 1

    # 10 s out of the group in a rebalance that does not end: subscribe again, same consumer
    membership.standing.state, membership.standing.join_state = "up", "wait-join"
    now[0] += 0.1
    assert membership.may_take_tasks() and membership.consumer is first and len(made) == 1
    now[0] += 10  # and that did not settle it either: a new consumer, subscribed
    assert membership.may_take_tasks()
    assert membership.consumer is not first and len(made) == 2 and membership.consumers_made == 2
    assert membership.consumer.assignment() == [] and membership.member
    _poll_until(lambda: membership.consumer, lambda: membership.standing.state is not None,
                "the new consumer's statistics did not come", timeout=5 * STATS_INTERVAL_MS / 1000)


def test_a_member_still_looking_for_its_coordinator_gets_a_new_consumer_at_once(unreachable):
    membership, first, now, made = unreachable
    assert membership.standing.state == "query-coord"  # nothing listens where its broker should be
    assert membership.may_take_tasks() and membership.consumer is first
    now[0] += 10  # a whole interval without a coordinator: its connection is what is stuck
    assert membership.may_take_tasks()
    assert membership.consumer is not first and len(made) == 2 and membership.member


def test_a_member_settled_without_partitions_is_left_alone_and_takes_one_when_free(bootstrap, namespace):
    topic, group = f"{namespace}.membership", f"{namespace}.membership-group"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)]).values():
        future.result(30)
    config = consumer_config(bootstrap, group, **{"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    holder = Consumer(config)
    holder.subscribe([topic])
    _poll_until(lambda: holder, holder.assignment, "the first member got no partition")
    now, made = [0.0], []
    membership = _membership(config, topic, now, made)
    try:
        membership.join()
        _poll_until(lambda: membership.consumer, membership.standing.settled, "the second member did not settle")
        for _ in range(5):  # idle for minutes: no rejoin, no new consumer
            now[0] += 60
            assert membership.may_take_tasks() and len(made) == 1
        holder.close()  # the partition is free: the idle member gets it
        _poll_until(lambda: membership.consumer, membership.consumer.assignment, "the idle member got no partition")
    finally:
        _close_all(made)
