"""A three-node (or n-node) Kafka cluster on 127.0.0.1 for fault tests and for trying the
engine against replication: n combined broker+controller JVMs, a static controller quorum
of all n, replicated internal topics.

    cluster = LocalCluster(nodes=3, base_port=29400, state_dir="/some/dir")
    bootstrap = cluster.start()         # "127.0.0.1:29400,127.0.0.1:29402,127.0.0.1:29404"
    cluster.kill(2)                      # SIGKILL node 2 (its node.id), data kept
    cluster.start_node(2)                # it rejoins and catches up
    cluster.stop()

Each node is a `LocalBroker` (its own state directory `node-<id>`, client port
`base_port + 2 * (id - 1)`, controller port one above) formatted with the cluster's one
id. With three nodes: replication factor 3 and `min.insync.replicas` 2 by default, for
the consumer offsets and the transaction state too, so one node may die at any time
without losing an acknowledged write or stopping transactions.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from streamproc.devenv.broker import LocalBroker
from streamproc.devenv.broker_config import random_cluster_id
from streamproc.devenv.broker_errors import BrokerError
from streamproc.devenv.broker_settings import HOST

#: Per node: a third of the single broker's heap; three of them share two cores.
CLUSTER_HEAP = "-Xms512m -Xmx512m"


class LocalCluster:
    def __init__(self, nodes: int = 3, base_port: int = 29400, state_dir: str | os.PathLike[str] = ".",
                 heap: str = CLUSTER_HEAP, kafka_version: str | None = None) -> None:
        if nodes < 1:
            raise BrokerError(f"a cluster needs at least one node, got {nodes}")
        self.state_dir = Path(state_dir).expanduser().resolve()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        id_file = self.state_dir / "cluster.id"
        if not id_file.is_file():  # kept: a restart formats nothing, a new node joins the same cluster
            id_file.write_text(random_cluster_id())
        cluster_id = id_file.read_text().strip()
        voters = ",".join(f"{n}@{HOST}:{base_port + 2 * (n - 1) + 1}" for n in range(1, nodes + 1))
        replicas, min_isr = min(3, nodes), 2 if nodes >= 3 else 1
        replication = {
            "controller.quorum.voters": voters,
            "default.replication.factor": replicas, "min.insync.replicas": min_isr,
            "offsets.topic.replication.factor": replicas,
            "transaction.state.log.replication.factor": replicas, "transaction.state.log.min.isr": min_isr,
            "share.coordinator.state.topic.replication.factor": replicas,
            "share.coordinator.state.topic.min.isr": min_isr,
            # the single node's unclean election (see broker_config) only where there is one
            # replica: with more, it could elect one that missed acknowledged writes
            "unclean.leader.election.enable": replicas == 1,
        }
        self.brokers = {n: LocalBroker(port=base_port + 2 * (n - 1), controller_port=base_port + 2 * (n - 1) + 1,
                                       state_dir=self.state_dir / f"node-{n}", kafka_version=kafka_version,
                                       heap=heap, cluster_id=cluster_id,
                                       extra_properties={"node.id": n, **replication})
                        for n in range(1, nodes + 1)}

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def start(self, timeout: float = 120.0) -> str:
        """Start every node at once (a node answers only once a quorum of controllers is up)."""
        errors: list[BaseException] = []

        def start(broker: LocalBroker) -> None:
            try:
                broker.start(timeout=timeout)
            except BaseException as exc:  # noqa: BLE001 - reported below, after the others
                errors.append(exc)

        threads = [threading.Thread(target=start, args=(b,)) for b in self.brokers.values()]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return self.bootstrap

    def start_node(self, node: int, timeout: float = 90.0) -> None:
        self.brokers[node].start(timeout=timeout)

    def kill(self, node: int | None = None) -> None:
        """SIGKILL one node (by node.id), or all of them."""
        for n, broker in self.brokers.items():
            if node is None or n == node:
                broker.kill()

    def stop(self, timeout: float = 30.0) -> None:
        """Controlled shutdown of every node, in parallel (the last ones wait for no quorum)."""
        threads = [threading.Thread(target=b.stop, args=(timeout,)) for b in self.brokers.values()]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def status(self) -> dict[str, dict]:
        return {f"node-{n}": b.status() for n, b in self.brokers.items()}
