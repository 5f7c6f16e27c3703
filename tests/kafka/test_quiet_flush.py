"""A producer's burst goes out as one request once its sends pause, and a lone record goes
after the pause, not after the producer's linger (`streamproc/kafka/quiet_flush.py`), on a
real broker. The times are scaled up (a 5 s linger, a 200 ms pause) so that a busy machine
cannot blur them; the client's own are 5 ms and 1 ms."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from streamproc.client import SyncClient
from streamproc.kafka.config import producer_config
from streamproc.kafka.quiet_flush import QuietFlush

LINGER_MS = 5000
QUIET_MS = 200


@pytest.fixture
def topic(bootstrap, namespace) -> str:
    name = f"{namespace}.burst"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: its futures die with it
    for future in admin.create_topics([NewTopic(name, 1, 1)]).values():
        future.result(30)
    return name


@pytest.fixture
def flushed(bootstrap, topic):
    """A `Counted` producer and the `QuietFlush` on it (pausing QUIET_MS), closed after."""
    counted = Counted(bootstrap, topic)
    quiet = QuietFlush(counted.producer, QUIET_MS)
    yield counted, quiet
    quiet.close()


class Counted:
    """A producer lingering LINGER_MS, its deliveries' times and its produce requests."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.delivered: list[float] = []
        self.stats: dict = {}
        self.producer = Producer(producer_config(bootstrap, **{
            "linger.ms": LINGER_MS, "statistics.interval.ms": 100, "stats_cb": self._on_stats}))
        # Connected, with its producer id, before the counting starts: a producer's first
        # record waits for both, longer than a flush waits, and so goes by the linger.
        self.producer.produce(topic, b"warm", partition=0)
        self.producer.flush(30)
        self._requests_before = self.produce_requests()

    def produce(self, topic: str, n: int, gap_s: float, quiet: QuietFlush | None) -> float:
        for i in range(n):
            if i:
                time.sleep(gap_s)
            self.producer.produce(topic, b"x", partition=0, on_delivery=self._on_delivery)
            if quiet is not None:
                quiet.sent()
        return time.monotonic()

    def wait_delivered(self, n: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.delivered) < n and time.monotonic() < deadline:
            self.producer.poll(0.01)

    def produce_requests(self) -> int:
        self.stats = {}
        while not self.stats:  # the next statistics, after the deliveries
            self.producer.poll(0.05)
        return sum(b["req"].get("Produce", 0) for b in self.stats["brokers"].values()) - getattr(
            self, "_requests_before", 0)

    def _on_delivery(self, err, msg) -> None:
        assert err is None, err
        self.delivered.append(time.monotonic())

    def _on_stats(self, data: str) -> None:
        self.stats = json.loads(data)


def test_a_burst_goes_as_one_request_once_the_sends_pause_not_after_the_linger(flushed, topic):
    counted, quiet = flushed
    last_sent = counted.produce(topic, 8, 0.01, quiet)  # pauses far shorter than QUIET_MS
    counted.wait_delivered(8, LINGER_MS / 1000 * 2)
    assert len(counted.delivered) == 8
    assert max(counted.delivered) - last_sent < LINGER_MS / 1000 / 2, "sent by the linger, not the pause"
    assert counted.produce_requests() == 1


def test_a_lone_record_leaves_after_the_pause_not_after_the_linger(flushed, topic):
    counted, quiet = flushed
    sent = counted.produce(topic, 1, 0, quiet)
    counted.wait_delivered(1, LINGER_MS / 1000 * 2)
    assert counted.delivered and counted.delivered[0] - sent < LINGER_MS / 1000 / 2
    assert counted.delivered[0] - sent >= QUIET_MS / 1000 * 0.9  # held for the pause


def test_while_held_pauses_longer_than_the_quiet_do_not_split_a_burst(flushed, topic):
    counted, quiet = flushed
    quiet.hold()  # e.g. a worker's attempts still running
    counted.produce(topic, 3, QUIET_MS / 1000 * 1.5, quiet)
    counted.producer.poll(QUIET_MS / 1000 * 1.5)
    assert counted.delivered == [], "flushed while held"
    released = time.monotonic()
    quiet.release()
    counted.wait_delivered(3, LINGER_MS / 1000 * 2)
    assert len(counted.delivered) == 3 and max(counted.delivered) - released < LINGER_MS / 1000 / 2
    assert counted.produce_requests() == 1


def test_an_urgent_record_leaves_after_the_pause_even_while_held(flushed, topic):
    """A START the attempt waits on is not kept by the other attempts' holds."""
    counted, quiet = flushed
    quiet.hold()
    sent = time.monotonic()
    counted.producer.produce(topic, b"x", partition=0, on_delivery=counted._on_delivery)
    quiet.sent(urgent=True)
    counted.wait_delivered(1, LINGER_MS / 1000 * 2)
    assert counted.delivered and counted.delivered[0] - sent < LINGER_MS / 1000 / 2
    assert quiet.holds == 1


def test_without_it_the_record_waits_for_the_linger(bootstrap, topic):
    """The control: the same producer alone sends only when its linger runs out."""
    counted = Counted(bootstrap, topic)
    sent = counted.produce(topic, 1, 0, None)
    counted.wait_delivered(1, LINGER_MS / 1000 * 2)
    assert counted.delivered and counted.delivered[0] - sent >= LINGER_MS / 1000 * 0.9


def test_a_client_sends_through_it_unless_the_caller_chose_a_linger(bootstrap, namespace):
    with SyncClient(bootstrap, namespace) as client:
        assert client.async_client._quiet is not None
    with SyncClient(bootstrap, namespace, **{"linger.ms": 20}) as client:
        assert client.async_client._quiet is None
