"""Every request the broker completed in a window, by client role and API: its request logger.

The broker's meters (`bench/broker_requests.py`) count requests by API and partitions by
topic, but not whose a request was, nor whether a fetch came back empty. Kafka's
`kafka.request.logger` at DEBUG writes one line per completed request with the client's
id, the partitions asked for and, for a fetch, the bytes each returned. `RequestLog` turns
it on for a window (over JMX: `bench/jmx/BrokerCounts.java --request-log`), marks the
window's ends with requests of a client id of its own, and reads the lines in between from
the broker's log (a local broker started by `streamproc broker start`: its log is
`kafka.log` under the broker's `kafka.logs.dir`). Logging every request costs the broker:
counts only, never timings, while it is on.

Roles come from the client ids streamproc gives (`kafka/config.py: client_id`):
`streamproc-engine-*` the engine, `streamproc-worker-*` a worker, plain `streamproc` a
client (here the bench's producer and its events reader); anything else is the broker's own
(its transaction markers, the verification of transactional produces). A fetch or produce
is named by its topics' kinds too (`engine FETCH commands`, `worker FETCH replies`); those
of other namespaces are left out (other requests cannot be told apart: keep the broker to
the bench while it counts).
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections import Counter
from pathlib import Path

from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient

from bench.broker_requests import READER
from streamproc.devenv.broker_jvm import find_java

_MARK = "Completed request:"


def role_of(client_id: str) -> str:
    if client_id.startswith("streamproc-engine-"):
        return "engine"
    if client_id.startswith("streamproc-worker-"):
        return "worker"
    if client_id == "streamproc":
        return "client"
    return "broker"


def topic_kind(name: str, namespace: str) -> str:
    """`commands`, `events`, `tasks`, `workflow-tasks`, `replies`, `changelog`, or Kafka's own topics."""
    return name.removeprefix(f"{namespace}.").split(".")[0] if name.startswith(f"{namespace}.") else name


class RequestLog:
    """Counts of the requests the broker completed between `start()` and `stop()`."""

    def __init__(self, broker_pid: int, bootstrap: str, namespace: str) -> None:
        self.broker_pid = broker_pid
        self.bootstrap = bootstrap
        self.namespace = namespace
        self.log_path = _broker_log(broker_pid)
        mark = uuid.uuid4().hex[:8]
        self._starts, self._ends = f"request-log-start-{mark}", f"request-log-end-{mark}"
        self._topic_ids: dict[str, str] = {}

    def start(self) -> None:
        self._level("DEBUG")
        self._mark(self._starts)

    def stop(self) -> None:
        """Marks the window's end and turns the logger off; call while the topics still exist."""
        self._topic_ids = self._ids_of_topics()
        self._mark(self._ends)
        self._level("INFO")

    def counts(self) -> dict[str, Counter]:
        """`requests_by_client` by "role API [topics]", `empty_fetches_by_client` (every
        partition returned 0 bytes) by the same name, `produced_bytes_by_client` by "role topic"."""
        requests, empty, produced = Counter(), Counter(), Counter()
        for entry in self._window():
            header = entry["requestHeader"]
            role, api = role_of(header["clientId"]), header["requestApiKeyName"]
            name = f"{role} {api}"
            # The response names the partitions (the request is sometimes logged as "" once released).
            if api == "FETCH":
                answered = entry["response"]["responses"]
                if answered and not any(t["topicId"] in self._topic_ids for t in answered):
                    continue  # another namespace's consumer
                topics = sorted({self._kind(t["topicId"]) for t in answered})
                name += f" {'+'.join(topics)}" if topics else " (no partitions)"
                if sum(p.get("recordsSizeInBytes", 0) for t in answered for p in t["partitions"]) == 0:
                    empty[name] += 1
            elif api == "PRODUCE":
                names = [t["name"] for t in entry["response"]["responses"]]
                if not any(n.startswith(f"{self.namespace}.") for n in names):
                    continue  # another namespace's producer
                kinds = sorted({topic_kind(n, self.namespace) for n in names})
                name += f" {'+'.join(kinds)}"
                if isinstance(entry["request"], dict):
                    for t in entry["request"]["topicData"]:
                        produced[f"{role} {topic_kind(t['name'], self.namespace)}"] += sum(
                            p["recordsSizeInBytes"] for p in t["partitionData"])
            requests[name] += 1
        return {"requests_by_client": requests, "empty_fetches_by_client": empty,
                "produced_bytes_by_client": produced}

    def _kind(self, topic_id: str) -> str:
        return topic_kind(self._topic_ids.get(topic_id, topic_id), self.namespace)

    def _window(self):
        """The request lines between the two marks, across the log's rolled files (oldest
        first, by modification time: which index is newest depends on the rollover strategy)."""
        files = sorted(self.log_path.parent.glob(self.log_path.name + ".*"), key=lambda p: p.stat().st_mtime)
        inside = False
        for path in [*files, self.log_path]:
            with open(path, errors="replace") as lines:
                for line in lines:
                    at = line.find(_MARK)
                    if at < 0:
                        continue
                    entry = json.loads(line[at + len(_MARK):line.rindex("} (") + 1])
                    client = entry["requestHeader"]["clientId"]
                    if client == self._ends:
                        return
                    if client == self._starts:
                        inside = True
                    elif inside:
                        yield entry
        raise RuntimeError(f"the request log's marks were not found in {self.log_path} (rolled over?)")

    def _mark(self, client_id: str) -> None:
        AdminClient({"bootstrap.servers": self.bootstrap, "client.id": client_id}).list_topics(timeout=30)

    def _level(self, level: str) -> None:
        subprocess.run([find_java(), str(READER), str(self.broker_pid), "--request-log", level], check=True,
                       capture_output=True, timeout=120)

    def _ids_of_topics(self) -> dict[str, str]:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        names = [n for n in admin.list_topics(timeout=30).topics if n.startswith(f"{self.namespace}.")]
        described = admin.describe_topics(TopicCollection(names)) if names else {}
        # The broker logs topic ids in URL-safe base64; the client gives standard base64.
        return {str(f.result().topic_id).replace("+", "-").replace("/", "_"): n for n, f in described.items()}


def _broker_log(broker_pid: int) -> Path:
    args = Path(f"/proc/{broker_pid}/cmdline").read_bytes().split(b"\0")
    for arg in args:
        if arg.startswith(b"-Dkafka.logs.dir="):
            return Path(arg.split(b"=", 1)[1].decode()) / "kafka.log"
    raise RuntimeError(f"broker {broker_pid} names no kafka.logs.dir: its request log cannot be found")
