"""Existing topics that cannot be the engine's stop it at start, with one line saying why:
a commands topic with another partition count than configured, a changelog not compacted."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from streamproc.protocol.topics import Topics
from tests.support.engines import engine_process

pytestmark = pytest.mark.kafka


def _create(bootstrap: str, topics: dict[str, tuple[int, dict[str, str]]]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, n, 1, config=config) for name, (n, config) in topics.items()])
    for future in futures.values():
        future.result(30)


def _refusal(bootstrap: str, namespace: str, tmp_path, partitions: int) -> str:
    engine = engine_process(bootstrap, namespace, "checked", tmp_path / "state", tmp_path, partitions=partitions)
    engine.env["STREAMPROC_LOG_FORMAT"] = "console"
    code = engine.start().wait_exit(45)
    text = engine.log_text()
    assert code == 1, text
    assert "Traceback" not in text
    return text.strip().splitlines()[-1]


def test_a_commands_topic_with_another_partition_count_is_refused(bootstrap, namespace, tmp_path):
    topics = Topics(namespace)
    _create(bootstrap, {topics.commands: (3, {})})
    line = _refusal(bootstrap, namespace, tmp_path, partitions=4)
    assert line.startswith(f"Error: topic {topics.commands} has 3 partitions, the engine is configured for 4 "
                           f"(STREAMPROC_PARTITIONS)"), line
    assert "STREAMPROC_PARTITIONS=3" in line


def test_a_changelog_that_is_not_compacted_is_refused(bootstrap, namespace, tmp_path):
    topics = Topics(namespace)
    _create(bootstrap, {topics.commands: (2, {}), topics.changelog: (2, {"cleanup.policy": "delete"})})
    line = _refusal(bootstrap, namespace, tmp_path, partitions=2)
    assert line.startswith(f"Error: topic {topics.changelog} has cleanup.policy=delete, the engine's changelog "
                           f"needs cleanup.policy=compact"), line
