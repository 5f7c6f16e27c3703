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

        real_apply = PartitionDb.apply

        def failing_apply(self, writes, checkpoint):
            raise LocalDiskDied("crash after commit, before the local write")

        monkeypatch.setattr(PartitionDb, "apply", failing_apply)
        client.start_job(key, 1, "w")
        client.flush()
        events.read_until(lambda e: e.count("STARTED") == 1, timeout=30)  # committed to Kafka
        first.thread.join(30)
        assert not first.thread.is_alive()                                   # the engine died
        monkeypatch.setattr(PartitionDb, "apply", real_apply)

    with EngineThread(settings, idle_poll_ms=10) as engine:
        assert engine.stats.restored_records >= 2      # the job and its deadline came back
        client.complete_job(key, 1, "done")
        client.flush()
        events.read_until(lambda e: e.count("COMPLETED") == 1, timeout=30)
        assert events.rejections() == []
    client.close()
    events.close()
