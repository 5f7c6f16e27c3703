"""Topic creation: the engine's topics with the configs exactly-once and recovery rely on."""

from __future__ import annotations

import time

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from streamproc.kafka.config import admin_config
from streamproc.kafka.topic_checks import check_engine_topics
from streamproc.protocol.topics import Topics
from streamproc.settings import Settings

#: The changelog is compacted soon after writes, so a takeover reads live state, not history.
CHANGELOG_CONFIG = {
    "cleanup.policy": "compact",
    "segment.ms": "60000",
    "min.cleanable.dirty.ratio": "0.1",
    "delete.retention.ms": "86400000",
}
#: Replies matter only to a client waiting now.
REPLIES_CONFIG = {"retention.ms": str(3600 * 1000)}
#: Events are kept a week by default: the slowest exporter we support must keep up.
EVENTS_CONFIG = {"retention.ms": str(7 * 24 * 3600 * 1000)}


class TopicAdmin:
    def __init__(self, bootstrap: str, topics: Topics, client_config: dict | None = None,
                 settings: Settings | None = None) -> None:
        """`client_config`: more AdminClient settings (the engine's reconnect backoff and log throttle).
        Topics are created with the replication of `settings` (default: the environment's)."""
        self.topics = topics
        settings = settings or Settings.from_env(bootstrap=bootstrap)
        #: -1: the broker's default.replication.factor (a single dev broker: 1; a cluster: 3).
        self.replication_factor = settings.replication_factor
        self._replication_config = ({"min.insync.replicas": str(settings.min_insync_replicas)}
                                    if settings.min_insync_replicas > 0 else {})
        self._admin = AdminClient(admin_config(bootstrap, **(client_config or {})))
        self._known: set[str] = set()

    def ensure_engine_topics(self, partitions: int) -> int:
        """Create commands/events/changelog/replies if missing, check the ones that existed
        (`StartRefused` if they cannot be the engine's); returns the commands topic's partitions."""
        t = self.topics
        self.ensure({t.commands: (partitions, {}), t.events: (partitions, EVENTS_CONFIG),
                     t.changelog: (partitions, CHANGELOG_CONFIG), t.replies: (partitions, REPLIES_CONFIG)})
        check_engine_topics(self._admin, t, partitions)
        return self.partitions(t.commands)

    def ensure_task_queue(self, queue: str, partitions: int, workflow: bool = False) -> str:
        """The topic of a task queue (activity/job tasks, or `workflow` tasks), created if missing."""
        name = self.topics.workflow_tasks(queue) if workflow else self.topics.tasks(queue)
        if name not in self._known:
            self.ensure({name: (partitions, {})})
        return name

    def ensure(self, wanted: dict[str, tuple[int, dict[str, str]]], timeout: float = 30) -> None:
        missing = [n for n in wanted if n not in self._known]
        if not missing:
            return
        existing = self._topics_metadata(timeout)
        new = [NewTopic(n, wanted[n][0], self.replication_factor, config={**self._replication_config, **wanted[n][1]})
               for n in missing if n not in existing]
        if new:
            for name, future in self._admin.create_topics(new, operation_timeout=timeout).items():
                try:
                    future.result(timeout=timeout)
                except KafkaException as exc:
                    if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                        raise
        self._wait_for_leaders(missing, timeout)
        self._known.update(missing)

    def _topics_metadata(self, timeout: float) -> dict:
        """Every topic's metadata, asked again within `timeout` after a transport failure: a
        new client's first metadata request failed at once with "Broker transport failure"
        on a loaded machine, right after the broker restarted, and a worker starting then exited."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self._admin.list_topics(timeout=max(deadline - time.monotonic(), 0.1)).topics
            except KafkaException as exc:
                error = exc.args[0]
                passing = error.retriable() or error.code() in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)
                if not passing or time.monotonic() >= deadline:
                    raise
            time.sleep(0.2)

    def _wait_for_leaders(self, names: list[str], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            md = self._topics_metadata(timeout)
            if all(n in md and md[n].error is None and md[n].partitions
                   and all(p.leader >= 0 for p in md[n].partitions.values()) for n in names):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"topics {names} have no leader after {timeout} s")
            time.sleep(0.05)

    def partitions(self, topic: str, timeout: float = 30) -> int:
        """Partitions of a topic, waiting up to `timeout` for it to be created (by the engine)."""
        deadline = time.monotonic() + timeout
        while True:
            # Metadata for all topics: asking for one by name would auto-create it on
            # brokers that allow that, with the wrong partition count.
            md = self._topics_metadata(timeout).get(topic)
            if md is not None and md.error is None and md.partitions:
                return len(md.partitions)
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {topic} does not exist after waiting {timeout} s "
                                   f"(is the engine running with this namespace?): "
                                   f"{md.error if md else 'unknown'}")
            time.sleep(0.2)

    def namespace_topics(self, timeout: float = 30) -> list[str]:
        """Every topic of this namespace (engine topics and task queues)."""
        prefix = f"{self.topics.namespace}."
        return sorted(t for t in self._topics_metadata(timeout) if t.startswith(prefix))

    def delete(self, names: list[str], timeout: float = 30) -> None:
        for future in self._admin.delete_topics(names, operation_timeout=timeout).values():
            try:
                future.result(timeout=timeout)
            except KafkaException:
                pass
        self._known.difference_update(names)
