"""What the broker was asked to do, counted by its own meters (JMX), cheaply enough to count
under load: requests by API (the broker's own included: the transaction markers it writes,
the verification of transactional produces of KIP-890), and fetch requests, produce
requests and records in by topic, which tells whose they were (the engine fetches the
commands topic, job workers their task topic and their replies, a bench its events).

`bench/jmx/BrokerCounts.java` reads the meters, attached to the broker's JVM by its pid
(same user; a local broker only). Counts need no quiet machine.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

from streamproc.devenv.broker_jvm import find_java

READER = Path(__file__).resolve().parent / "jmx" / "BrokerCounts.java"
KINDS = ("requests", "TotalFetchRequestsPerSec", "TotalProduceRequestsPerSec", "MessagesInPerSec")


def broker_counts(broker_pid: int) -> dict[str, Counter]:
    """The broker's cumulative counters now."""
    out = subprocess.run([find_java(), str(READER), str(broker_pid)], check=True, capture_output=True,
                         text=True, timeout=120).stdout
    data = json.loads(out)
    return {kind: Counter(data.get(kind, {})) for kind in KINDS}


def counts_since(before: dict[str, Counter], after: dict[str, Counter], namespace: str) -> dict[str, dict]:
    """What grew between two readings. Topics are grouped by kind (`commands`, `events`,
    `tasks`, `replies`, `changelog`, and Kafka's own `__consumer_offsets`,
    `__transaction_state`); other namespaces' topics are left out."""
    grown: dict[str, dict] = {}
    for kind in KINDS:
        delta: Counter = Counter()
        for name, n in after[kind].items():
            grew = n - before[kind].get(name, 0)
            if kind != "requests":
                if name.startswith(f"{namespace}."):
                    name = name.removeprefix(f"{namespace}.").split(".")[0]
                elif not name.startswith("__"):
                    continue
            if grew:
                delta[name] += grew
        grown[kind] = dict(delta)
    return grown
