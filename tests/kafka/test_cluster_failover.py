"""A three-broker cluster (replication 3, min.insync.replicas 2) under load: the leader of a
commands partition, of an events partition and of the engine's transaction-state partition
are SIGKILLed in turn (each restarted before the next). Nothing is lost, nothing duplicated,
and the engine stops committing no longer than a leader election takes."""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AdminClient

from streamproc.devenv.kraft_cluster import LocalCluster
from tests.support.fault_rig import NAMESPACE, RECOVERY_S, Rig

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

#: transaction.state.log.num.partitions of the local brokers.
TRANSACTION_STATE_PARTITIONS = 4
#: The longest pause in the engine's commits we accept: a leader election and the
#: client's metadata refresh, with room for a busy two-core machine.
MAX_GAP_S = 60


def _java_string_hash(text: str) -> int:
    h = 0
    for ch in text:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def transaction_state_partition(transactional_id: str) -> int:
    """The __transaction_state partition of a transactional id (Kafka: abs(hashCode) % partitions)."""
    return (_java_string_hash(transactional_id) & 0x7FFFFFFF) % TRANSACTION_STATE_PARTITIONS


def _leader(admin: AdminClient, topic: str, partition: int) -> int:
    return admin.list_topics(timeout=10).topics[topic].partitions[partition].leader


def _wait_all_in_sync(admin: AdminClient, topics: list[str], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(timeout=10).topics
        if all(len(p.isrs) == 3 for t in topics for p in md[t].partitions.values()):
            return
        assert time.monotonic() < deadline, "the restarted node did not rejoin every ISR"
        time.sleep(0.5)


def _longest_gap_s(rig: Rig) -> float:
    """The longest time between two consecutive events (jobs are created 20 times a second,
    so a gap is time the engine did not commit)."""
    stamps = sorted(r.timestamp_ms for r in rig.events.records if r.timestamp_ms and r.timestamp_ms > 0)
    return max((b - a for a, b in zip(stamps, stamps[1:])), default=0) / 1000


@pytest.mark.timeout(900)
def test_the_leaders_of_commands_events_and_transaction_state_killed_in_turn(tmp_path):
    cluster = LocalCluster(nodes=3, base_port=29440, state_dir=tmp_path / "cluster")
    rig = Rig(tmp_path, cluster)
    admin = AdminClient({"bootstrap.servers": rig.bootstrap})
    recoveries = {}
    try:
        rig.start()
        rig.start_workflows("before", 30)
        txn = transaction_state_partition(f"{NAMESPACE}.engine.restarts")
        targets = [("commands", f"{NAMESPACE}.commands", 0), ("events", f"{NAMESPACE}.events", 0),
                   ("transaction-state", "__transaction_state", txn)]
        for name, topic, partition in targets:
            time.sleep(2)
            leader = _leader(admin, topic, partition)
            rig.start_workflows(f"during-{name}", 10)
            cluster.kill(leader)
            recoveries[name] = round(rig.probe(name, timeout=RECOVERY_S), 1)
            rig.assert_alive()
            cluster.start_node(leader)
            _wait_all_in_sync(admin, [t for _, t, _ in targets])
        rig.check_everything_once()
        gap = _longest_gap_s(rig)
        print(f"\nleaders killed in turn: probe job and workflow done after {recoveries} s; longest pause "
              f"between events {gap:.1f} s; {rig.jobs} jobs and {len(rig.workflow_ids)} workflows once each; starts "
              f"the client gave up and asked again: {rig.start_give_ups[:3]}")
        assert gap < MAX_GAP_S, f"the engine committed nothing for {gap:.1f} s"
    finally:
        rig.close()
