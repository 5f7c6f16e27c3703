"""Workflow instances kept between tasks, so a worker replays a run's history only once.

After a worker answers a task with TASK_COMPLETE it keeps the run's instance, which is
exactly where the code stopped. The run's next task carries the history from the
previous completed task's WORKFLOW_TASK_SCHEDULED on (or all of it, from event 1); when
it *continues* what the instance was shown, the worker feeds it only the new events. It
continues it when:

* the instance was shown events 1..n, ending with the WORKFLOW_TASK_SCHEDULED (id n)
  this worker answered, and the task's history has that very event (same id, time and
  attempt) at that place;
* right after it come WORKFLOW_TASK_STARTED and WORKFLOW_TASK_COMPLETED for that task,
  the STARTED naming this worker (the engine accepted the answer the instance produced,
  not another worker's to the same task), then no other workflow task event until the
  new WORKFLOW_TASK_SCHEDULED at the end;
* this worker answered that task once: a task delivered to it again (its batch answered
  a second time after the broker was away, its partition back before the offset was
  committed) gets two answers, of which the engine keeps the first that lands, and the
  worker cannot tell which; its instance is not kept. The answers differ when local
  activities ran (their results are the code's input, not replayed).

Anything else (the answer timed out or was refused, another worker handled a task of
the run in between, the engine wrote a task failure, the task starts after event n)
means the instance may have run ahead of or behind what the history says: it is dropped,
and the worker replays the run from its whole history. The cache is a bounded LRU:
losing an entry only costs a replay.
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
    #: The last event the instance was shown: the WORKFLOW_TASK_SCHEDULED it answered.
    answered: dict[str, Any]


class StickyCache(Generic[Instance]):
    def __init__(self, max_runs: int) -> None:
        if max_runs < 0:
            raise ValueError(f"max_runs must be >= 0, got {max_runs}")
        self.max_runs = max_runs
        self._entries: collections.OrderedDict[str, _Entry[Instance]] = collections.OrderedDict()
        #: Runs whose task now running was answered here before: its instance is not kept.
        self._answered_twice: set[str] = set()
        #: Tasks served from the cache, and cached runs that had to be replayed after all.
        self.hits = 0
        self.misses = 0

    def take(self, task: WorkflowTask, identity: str) -> tuple[Instance, list[dict[str, Any]]] | None:
        """The run's cached instance and the events it has not seen, if `task`'s history
        continues what it was shown and answered as the worker `identity`; else None (and
        the stale entry is gone)."""
        entry = self._entries.pop(task.run_id, None)
        if entry is None:
            return None
        if task.history and task.history[-1] == entry.answered:  # this very task, again
            self._answered_twice.add(task.run_id)
        new_events = _new_events(task, entry.answered, identity)
        if new_events is None:
            self.misses += 1
            return None
        self.hits += 1
        return entry.instance, new_events

    def keep(self, task: WorkflowTask, instance: Instance) -> None:
        """Remember `instance` after it answered `task` (shown all of the run's history up
        to the task's WORKFLOW_TASK_SCHEDULED, the last event of `task.history`)."""
        if task.run_id in self._answered_twice:
            self._answered_twice.discard(task.run_id)
            return
        if self.max_runs == 0 or not task.history:
            return
        self._entries.pop(task.run_id, None)
        self._entries[task.run_id] = _Entry(instance, task.history[-1])
        while len(self._entries) > self.max_runs:
            self._entries.popitem(last=False)

    def peek(self, run_id: str) -> Instance | None:
        """The run's cached instance, left in place (a query reads it)."""
        entry = self._entries.get(run_id)
        return entry.instance if entry is not None else None

    def answered_event_id(self, run_id: str) -> int:
        """The WORKFLOW_TASK_SCHEDULED event id of the task the run's cached instance answered
        last (0: the run is not cached, or its task is running now). Safe from any thread."""
        entry = self._entries.get(run_id)
        event_id = entry.answered.get("event_id") if entry is not None else None
        return event_id if isinstance(event_id, int) else 0

    def entry(self, run_id: str) -> tuple[Instance, dict[str, Any]] | None:
        """The run's cached instance and the WORKFLOW_TASK_SCHEDULED it answered, left in place."""
        entry = self._entries.get(run_id)
        return None if entry is None else (entry.instance, entry.answered)

    def restore(self, run_id: str, instance: Instance, answered: dict[str, Any]) -> None:
        """Cache `instance`, which answered the task scheduled as `answered` (a task that rode
        along with an activity's completion, `ride_along`), unless the run got an entry since."""
        if self.max_runs == 0 or run_id in self._entries:
            return
        self._entries[run_id] = _Entry(instance, answered)
        while len(self._entries) > self.max_runs:
            self._entries.popitem(last=False)

    def forget_answer(self, run_id: str, scheduled_event_id: int) -> None:
        """The engine did not keep the answer to the task scheduled at `scheduled_event_id`:
        drop the run's instance if that answer is the one it holds."""
        entry = self._entries.get(run_id)
        if entry is not None and entry.answered.get("event_id") == scheduled_event_id:
            self.evict(run_id)

    def evict(self, run_id: str) -> None:
        self._entries.pop(run_id, None)
        self._answered_twice.discard(run_id)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, run_id: str) -> bool:
        return run_id in self._entries


def _new_events(task: WorkflowTask, answered: dict[str, Any], identity: str) -> list[dict[str, Any]] | None:
    """The events of `task` after the `answered` one, if they continue it (the answer
    `identity` gave was kept); else None."""
    answered_event_id = answered.get("event_id")
    at = answered_event_id - task.first_event_id if isinstance(answered_event_id, int) else -1
    history = task.history
    if at < 0 or len(history) < at + 4 or history[at] != answered:
        return None
    started, completed = history[at + 1], history[at + 2]
    continues = (answered.get("event_type") == _SCHEDULED
                 and started.get("event_type") == _STARTED
                 and started.get("attributes", {}).get("scheduled_event_id") == answered_event_id
                 and started.get("attributes", {}).get("identity") == identity
                 and completed.get("event_type") == _COMPLETED
                 and completed.get("attributes", {}).get("scheduled_event_id") == answered_event_id
                 # Only our task in between: another task means another worker's answer,
                 # whose commands this instance never issued.
                 and not any(e.get("event_type") in _TASK_EVENTS for e in history[at + 3:-1])
                 and history[-1].get("event_type") == _SCHEDULED)
    return history[at + 1:] if continues else None
