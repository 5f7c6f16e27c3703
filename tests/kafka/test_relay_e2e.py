"""The relay on a real broker (engine/relay.py): an engine owning every partition starts a
schedule's workflow on another partition in the transaction of its TRIGGER, from the first
pass after its assignment on; the START is on the log marked as processed and skipped
when read back; an aborted transaction of
relayed starts is redone and every action starts exactly once; a START for a partition
of another engine travels through the log as before."""

from __future__ import annotations

import collections
import threading
import time
from datetime import datetime, timezone

import pytest
from confluent_kafka import Consumer, TopicPartition

from streamproc.client import (
    Client,
)
from streamproc.engine.schedules.actions import scheduled_workflow_id
from streamproc.protocol import codec
from streamproc.protocol.partitioning import partition_for
from streamproc.protocol.topics import Topics
from tests.support.engines import EngineThread
from tests.support.history import EventLog
from tests.support.tick_schedules import create_tick_schedule

pytestmark = pytest.mark.kafka

PARTITIONS = 4


def _elsewhere(prefix: str, at: datetime, count: int, target: int | None = None) -> list[tuple[str, str]]:
    """`count` (schedule id, workflow id) whose workflow is on another partition than the
    schedule (on `target`, if given)."""
    found = []
    for n in range(10_000):
        schedule_id = f"{prefix}-{n}"
        workflow_id = scheduled_workflow_id(schedule_id, int(at.timestamp() * 1000))
        home, there = partition_for(schedule_id, PARTITIONS), partition_for(workflow_id, PARTITIONS)
        if home != there and target in (None, there):
            found.append((schedule_id, workflow_id))
            if len(found) == count:
                return found
    raise AssertionError("not enough schedule ids")


def _started(log: EventLog) -> list:
    return log.events("WORKFLOW", "WORKFLOW_EXECUTION_STARTED")


def _commands_on(bootstrap: str, namespace: str, partition: int) -> list:
    """The commands topic's partition as a read_committed reader sees it: (intent, headers, record)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "relay-test", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(Topics(namespace).commands, partition, 0)])
        out, deadline = [], time.monotonic() + 10
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                break
            if msg.error() is None:
                out.append((msg.headers(), codec.decode(msg.value(), msg.headers())))
        return out
    finally:
        consumer.close()


def test_a_start_for_a_partition_of_the_same_engine_is_processed_with_its_trigger(bootstrap, namespace, tmp_path):
    events = EventLog(bootstrap, namespace)
    now = int(time.time())
    first, second = (datetime.fromtimestamp(now + s, tz=timezone.utc) for s in (6, 9))
    (early_id, early_wf), = _elsewhere("early", first, 1)
    target = partition_for(early_wf, PARTITIONS)
    pairs = _elsewhere("relayed", second, 5, target)
    with EngineThread.on(bootstrap, namespace, tmp_path / "state", "relay", partitions=PARTITIONS) as engine, \
            Client(bootstrap, namespace) as client:
        # The first START after the assignment too: by then the engine has read its
        # partitions' logs to the end they had (`kafka/relay_catch_up.py`).
        create_tick_schedule(client, early_id, first, first)
        for schedule_id, _ in pairs:
            create_tick_schedule(client, schedule_id, second, second)
        expected = {early_wf, *(w for _, w in pairs)}
        events.read_until(lambda log: {r.value["workflow_id"] for r in _started(log)} >= expected, timeout=60)
        time.sleep(1)  # anything started twice would be there by now
        events.read_available()
        assert engine.stats.relayed_commands == len(pairs) + 1
        assert engine.stats.echoes >= 1  # the relayed STARTs read back, skipped
    events.close()
    started = collections.Counter(r.value["workflow_id"] for r in _started(events))
    assert set(started) == expected and max(started.values()) == 1
    positions = {r.value["workflow_id"]: r.source_position for r in _started(events)}
    assert all(position == -1 for position in positions.values())  # processed in the TRIGGER's transaction
    written = _commands_on(bootstrap, namespace, target)
    starts = [(headers, record) for headers, record in written if record.value_type == "WORKFLOW"]
    # One relayed batch per schedule partition and pass, on the log marked as processed.
    assert starts and all(codec.header(h, codec.PROCESSED_HEADER) is not None for h, _ in starts)


def test_an_aborted_transaction_of_relayed_starts_is_redone_and_each_action_starts_once(bootstrap, namespace,
                                                                                          tmp_path):
    events = EventLog(bootstrap, namespace)
    now = int(time.time())
    first, second = (datetime.fromtimestamp(now + s, tz=timezone.utc) for s in (6, 9))
    warm = [_elsewhere(f"warm{t}", first, 1, t)[0] for t in range(PARTITIONS)]  # a pass before
    pairs = _elsewhere("aborted", second, 20)
    with EngineThread.on(bootstrap, namespace, tmp_path / "state", "relay-abort", partitions=PARTITIONS) as engine, \
            Client(bootstrap, namespace) as client:
        relayed, failed = threading.Event(), threading.Event()
        real_relay, real_commit = engine._relay.relay, engine._txn.commit_transaction

        def relay(*args):
            out = real_relay(*args)
            if out and not failed.is_set():
                relayed.set()
            return out

        def commit(*args):
            if relayed.is_set() and not failed.is_set():
                failed.set()  # this commit, or the next one's over it: both are rewound
                raise RuntimeError("the test refuses the commit of relayed starts")
            return real_commit(*args)

        engine._relay.relay, engine._txn.commit_transaction = relay, commit
        for schedule_id, _ in [*warm, *pairs]:
            at = first if (schedule_id, _) in warm else second
            create_tick_schedule(client, schedule_id, at, at)
        expected = {w for _, w in [*warm, *pairs]}
        events.read_until(lambda log: {r.value["workflow_id"] for r in _started(log)} >= expected, timeout=90)
        time.sleep(1)
        events.read_available()
        assert failed.is_set()
    events.close()
    started = collections.Counter(r.value["workflow_id"] for r in _started(events))
    assert set(started) == expected and max(started.values()) == 1
    actions = collections.Counter(r.value["workflow_id"] for r in events.events("SCHEDULE", "ACTION_STARTED"))
    assert set(actions) == expected and max(actions.values()) == 1


def test_a_start_for_a_partition_of_another_engine_travels_through_the_log(bootstrap, namespace, tmp_path):
    events = EventLog(bootstrap, namespace)
    with EngineThread.on(bootstrap, namespace, tmp_path / "a", "relay-a", partitions=PARTITIONS) as a, \
            EngineThread.on(bootstrap, namespace, tmp_path / "b", "relay-b", partitions=PARTITIONS) as b, \
            Client(bootstrap, namespace) as client:
        deadline = time.monotonic() + 60
        while not (a.partitions and b.partitions and len({*a.partitions, *b.partitions}) == PARTITIONS
                   and not set(a.partitions) & set(b.partitions)):
            assert time.monotonic() < deadline, "the two engines did not share the partitions"
            time.sleep(0.2)
        time.sleep(2)  # no rebalance in flight
        owner_a = set(a.partitions)
        at = datetime.fromtimestamp(int(time.time()) + 6, tz=timezone.utc)
        pairs = [(s, w) for s, w in _elsewhere("other", at, 200)
                 if partition_for(s, PARTITIONS) in owner_a and partition_for(w, PARTITIONS) not in owner_a][:5]
        assert pairs
        for schedule_id, _ in pairs:
            create_tick_schedule(client, schedule_id, at, at)
        expected = {w for _, w in pairs}
        events.read_until(lambda log: {r.value["workflow_id"] for r in _started(log)} >= expected, timeout=60)
        time.sleep(1)
        events.read_available()
        assert set(a.partitions) == owner_a  # the same owners throughout
        assert a.stats.relayed_commands == b.stats.relayed_commands == 0
    events.close()
    started = collections.Counter(r.value["workflow_id"] for r in _started(events))
    assert set(started) == expected and max(started.values()) == 1
    assert all(r.source_position >= 0 for r in _started(events))  # each read from the log by its engine
    for target in {partition_for(w, PARTITIONS) for w in expected}:
        for headers, record in _commands_on(bootstrap, namespace, target):
            if record.value_type == "WORKFLOW":
                assert codec.header(headers, codec.PROCESSED_HEADER) is None
                assert codec.header(headers, codec.RELAY_HEADER) is None
