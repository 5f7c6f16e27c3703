"""What the broker was asked to do, counted by its own meters (JMX), cheaply enough to count
under load: requests by API (the broker's own included: the transaction markers it writes,
the verification of transactional produces of KIP-890), and fetch requests, produce
requests, records and bytes in and out by topic, which tells whose they were (the engine
fetches the commands topic, workers their task topics and their replies, a bench its
events), and the long-poll fetches that expired with nothing to return.

`bench/jmx/BrokerCounts.java` reads the meters, attached to the broker's JVM by its pid
(same user; a local broker only). Counts need no quiet machine. `per_unit` turns two
readings into the per job or per workflow figures the cost tools print.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

from streamproc.devenv.broker_jvm import find_java

READER = Path(__file__).resolve().parent / "jmx" / "BrokerCounts.java"
#: Meters counted by topic; the others (requests by API, expired fetches by fetcher) are not.
BY_TOPIC = ("TotalFetchRequestsPerSec", "TotalProduceRequestsPerSec", "MessagesInPerSec", "BytesInPerSec",
            "BytesOutPerSec")
KINDS = ("requests", *BY_TOPIC, "DelayedFetchExpires")
#: Requests every client or the broker makes whatever the load (group and broker heartbeats...).
BACKGROUND = {"BrokerHeartbeat", "Heartbeat", "Metadata", "ApiVersions", "FetchConsumer", "OffsetCommit",
              "FindCoordinator", "ListOffsets"}


def broker_counts(broker_pid: int) -> dict[str, Counter]:
    """The broker's cumulative counters now."""
    out = subprocess.run([find_java(), str(READER), str(broker_pid)], check=True, capture_output=True,
                         text=True, timeout=120).stdout
    data = json.loads(out)
    return {kind: Counter(data.get(kind, {})) for kind in KINDS}


def counts_since(before: dict[str, Counter], after: dict[str, Counter], namespace: str) -> dict[str, dict]:
    """What grew between two readings. Topics are grouped by kind (`commands`, `events`,
    `tasks`, `workflow-tasks`, `replies`, `changelog`, and Kafka's own `__consumer_offsets`,
    `__transaction_state`); other namespaces' topics are left out."""
    grown: dict[str, dict] = {}
    for kind in KINDS:
        delta: Counter = Counter()
        for name, n in after[kind].items():
            grew = n - before[kind].get(name, 0)
            if kind in BY_TOPIC:
                if name.startswith(f"{namespace}."):
                    name = name.removeprefix(f"{namespace}.").split(".")[0]
                elif not name.startswith("__"):
                    continue
            if grew:
                delta[name] += grew
        grown[kind] = dict(delta)
    return grown


def per_unit(grown: dict, units: int, transactions: int, unit: str = "job") -> dict:
    """`counts_since`'s figures per unit of work (`units` jobs or workflows, over which the
    engine committed `transactions`): requests by API (the consumers' fetches by topic
    instead, whose they were), produce requests per transaction by topic (how many
    partitions of each a transaction wrote: librdkafka's produce request carries one
    partition and the broker counts it per topic), records and bytes in by topic, and the
    consumers' fetches that expired empty."""
    requests = grown["requests"]

    def each(counts: dict, over: int, digits: int = 2) -> dict:
        return {k: round(v / over, digits) for k, v in sorted(counts.items())} if over else {}

    return {
        f"transactions_per_{unit}": round(transactions / units, 3),
        "broker_requests": round(sum(v for k, v in requests.items() if k != "FetchConsumer") / units, 2),
        "requests": each({k: v for k, v in requests.items() if k != "FetchConsumer"}, units),
        "produce_requests_per_transaction": each(grown["TotalProduceRequestsPerSec"], transactions),
        "fetch_requests": each(grown["TotalFetchRequestsPerSec"], units),
        "fetches_expired_empty": round(grown["DelayedFetchExpires"].get("consumer", 0) / units, 2),
        "records_in": each(grown["MessagesInPerSec"], units),
        "bytes_in": each(grown["BytesInPerSec"], units, 0),
        "broker_requests_per_transaction": round(
            sum(v for k, v in requests.items() if k not in BACKGROUND) / transactions, 1) if transactions else None,
    }
