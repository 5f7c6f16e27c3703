"""Workflow instances kept between tasks, so a worker replays a run's history only once.

After a worker answers a task with TASK_COMPLETE it keeps the run's instance, which is
exactly where the code stopped. The run's next task carries its whole history again
(every task does); when that history *continues* the one the instance was shown, the
worker feeds it only the new events. It continues it when:

* the instance was shown the first ``n`` events, ending with the WORKFLOW_TASK_SCHEDULED
  this worker answered, and the new history has those ids at those places;
* right after them come WORKFLOW_TASK_STARTED and WORKFLOW_TASK_COMPLETED for that task
  (the engine accepted the answer the instance produced), then no other workflow task
  event until the new WORKFLOW_TASK_SCHEDULED at the end.

Anything else (the answer timed out or was refused, another worker handled a task of
the run in between, the engine wrote a task failure) means the instance may have run
ahead of what the history says: it is dropped and the run replayed from its start.
The cache is a bounded LRU: losing an entry only costs a replay.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, Generic, TypeVar

from streamproc.worker.workflow_task_pages import WorkflowTask

__all__ = ["StickyCache"]

Instance = TypeVar("Instance")

_STARTED = "WORKFLOW_TASK_STARTED"
_COMPLETED = "WORKFLOW_TASK_COMPLETED"
_SCHEDULED = "WORKFLOW_TASK_SCHEDULED"
_TASK_EVENTS = frozenset({_SCHEDULED, _STARTED, _COMPLETED, "WORKFLOW_TASK_FAILED", "WORKFLOW_TASK_TIMED_OUT"})


@dataclasses.dataclass(slots=True)
class _Entry(Generic[Instance]):
    instance: Instance
    #: Events the instance was shown, and the id of the last one (the answered task's).
    shown: int
    answered_event_id: int


class StickyCache(Generic[Instance]):
    def __init__(self, max_runs: int) -> None:
        if max_runs < 0:
            raise ValueError(f"max_runs must be >= 0, got {max_runs}")
        self.max_runs = max_runs
        self._entries: collections.OrderedDict[str, _Entry[Instance]] = collections.OrderedDict()
        #: Tasks served from the cache, and cached runs that had to be replayed after all.
        self.hits = 0
        self.misses = 0

    def take(self, task: WorkflowTask) -> tuple[Instance, list[dict[str, Any]]] | None:
        """The run's cached instance and the events it has not seen, if `task`'s history
        continues what it was shown; else None (and the stale entry is gone)."""
        entry = self._entries.pop(task.run_id, None)
        if entry is None:
            return None
        if not _continues(task.history, entry.shown, entry.answered_event_id):
            self.misses += 1
            return None
        self.hits += 1
        return entry.instance, task.history[entry.shown:]

    def keep(self, task: WorkflowTask, instance: Instance) -> None:
        """Remember `instance` after it answered `task` (shown all of its history)."""
        if self.max_runs == 0:
            return
        self._entries.pop(task.run_id, None)
        self._entries[task.run_id] = _Entry(instance, len(task.history), task.scheduled_event_id)
        while len(self._entries) > self.max_runs:
            self._entries.popitem(last=False)

    def evict(self, run_id: str) -> None:
        self._entries.pop(run_id, None)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, run_id: str) -> bool:
        return run_id in self._entries


def _continues(history: list[dict[str, Any]], shown: int, answered_event_id: int) -> bool:
    if len(history) < shown + 3:
        return False
    last_shown, started, completed = history[shown - 1], history[shown], history[shown + 1]
    return (last_shown.get("event_id") == answered_event_id == shown
            and last_shown.get("event_type") == _SCHEDULED
            and started.get("event_type") == _STARTED
            and started.get("attributes", {}).get("scheduled_event_id") == answered_event_id
            and completed.get("event_type") == _COMPLETED
            and completed.get("attributes", {}).get("scheduled_event_id") == answered_event_id
            # Only our task in between: another task means another worker's answer,
            # whose commands this instance never issued.
            and not any(e.get("event_type") in _TASK_EVENTS for e in history[shown + 2:-1])
            and history[-1].get("event_type") == _SCHEDULED)
