"""Topic names of a namespace; the one place that spells them."""

from __future__ import annotations

import dataclasses
import re

_QUEUE_NAME = re.compile(r"^[A-Za-z0-9._-]{1,200}$")


def check_task_queue(name: str) -> str | None:
    """Why `name` cannot be a task queue, or None when it can (it becomes part of a topic name)."""
    if not isinstance(name, str) or not _QUEUE_NAME.match(name):
        return (f"task queue must be 1-200 characters of letters, digits, '.', '_' or '-', "
                f"got {name!r}")
    return None


@dataclasses.dataclass(frozen=True, slots=True)
class Topics:
    namespace: str = "streamproc"

    @property
    def commands(self) -> str:
        return f"{self.namespace}.commands"

    @property
    def events(self) -> str:
        return f"{self.namespace}.events"

    @property
    def changelog(self) -> str:
        return f"{self.namespace}.changelog"

    @property
    def replies(self) -> str:
        return f"{self.namespace}.replies"

    def tasks(self, queue: str) -> str:
        return f"{self.namespace}.tasks.{queue}"

    def workflow_tasks(self, queue: str) -> str:
        return f"{self.namespace}.workflow-tasks.{queue}"

    @property
    def engine_group(self) -> str:
        return f"{self.namespace}.engine"

    def worker_group(self, queue: str) -> str:
        return f"{self.namespace}.workers.{queue}"

    def workflow_worker_group(self, queue: str) -> str:
        return f"{self.namespace}.workflow-workers.{queue}"
