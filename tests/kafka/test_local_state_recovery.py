"""A crash between the transaction's commit and the local RocksDB write loses nothing.

The local copy is then behind the log; on restart the engine replays the changelog
from its checkpoint and continues as if the local write had happened.
"""

from __future__ import annotations

import pytest

from streamproc.client import Client
from streamproc.settings import Settings
from streamproc.state.db import PartitionDb
from tests.support.engines import EngineThread
from tests.support.history import EventLog
from tests.support.polling import wait_until

pytestmark = pytest.mark.kafka


class LocalDiskDied(Exception):
    pass


def test_restart_after_a_lost_local_write_replays_the_changelog(bootstrap, namespace, tmp_path, monkeypatch):
    settings = Settings(bootstrap=bootstrap, namespace=namespace, partitions=1,
                        state_dir=tmp_path, engine_id="lost-write")
    events = EventLog(bootstrap, namespace)
    client = Client(bootstrap, namespace)
    first = EngineThread(settings, idle_poll_ms=10)
    with first as engine:
        client.create_job("q", {"n": 1})
        client.flush()
        events.read_until(lambda e: e.count("CREATED") == 1, timeout=30)
        key = events.events(intent="CREATED")[0].key
        # The event is readable once its transaction commits; the local write follows it.
        # Fail only the writes after it, or the restart has nothing local to build on.
        wait_until(lambda: engine.stats.commands >= 1, timeout=30, what="the create written locally")

        real_apply = PartitionDb.apply

        def failing_apply(self, writes, checkpoint):
            raise LocalDiskDied("crash after commit, before the local write")

        monkeypatch.setattr(PartitionDb, "apply", failing_apply)
        client.start_job(key, 1, "w")
        client.flush()
        events.read_until(lambda e: e.count("STARTED") == 1, timeout=30)  # committed to Kafka
        # The engine rewinds instead of dying (it keeps failing: its local writes all fail);
        # it goes down as a crash would take it, with its local copy behind the log.
        engine.stop()
        first.thread.join(30)
        assert not first.thread.is_alive()
        monkeypatch.setattr(PartitionDb, "apply", real_apply)

    with EngineThread(settings, idle_poll_ms=10) as engine:
        assert engine.stats.restored_records >= 2      # the job and its deadline came back
        client.complete_job(key, 1, "done")
        client.flush()
        events.read_until(lambda e: e.count("COMPLETED") == 1, timeout=30)
        assert events.rejections() == []
    client.close()
    events.close()


def test_an_assignment_whose_opening_failed_half_way_is_finished_by_the_recovery(
        bootstrap, namespace, tmp_path, monkeypatch):
    """The broker may still be electing the changelog's leaders when the engine gets its
    partitions (NOT_LEADER_FOR_PARTITION): the partitions not opened then must be opened
    by the recovery, or they would never be processed."""
    from confluent_kafka import KafkaError, KafkaException

    from streamproc.kafka.engine import Engine

    settings = Settings(bootstrap=bootstrap, namespace=namespace, partitions=2,
                        state_dir=tmp_path, engine_id="half-open")
    real_open = Engine._open_partition
    failed: list[int] = []

    def open_fails_once_for_partition_1(self, pid):
        if pid == 1 and not failed:
            failed.append(pid)
            raise KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION, "leader moving"))
        real_open(self, pid)

    monkeypatch.setattr(Engine, "_open_partition", open_fails_once_for_partition_1)
    events = EventLog(bootstrap, namespace)
    with EngineThread(settings, idle_poll_ms=10) as engine, Client(bootstrap, namespace) as client:
        assert failed == [1] and sorted(engine.partitions) == [0, 1]
        for n in range(20):  # routing keys spread over both partitions
            client.create_job(f"q{n}", {"n": n}, routing_key=f"q{n}")
        client.flush()
        events.read_until(lambda e: e.count("CREATED") == 20, timeout=30)
        assert {e.partition_id for e in events.events(intent="CREATED")} == {0, 1}
        assert events.rejections() == []
    events.close()
