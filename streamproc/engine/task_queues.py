"""Which task queues may exist: the operator's patterns and a cap, checked by processors.

Every command that names a task queue (job CREATE, activity SCHEDULE, workflow START, a
workflow task's ScheduleActivityTask or ContinueAsNew) is admitted here before anything
is written; the engine creates a queue's topic only when it writes a task there, so a
refused name creates no topic.

The answer must be the same whenever the command is processed again (after a crash, or
by another engine taking the partition over), so it depends only on the configuration
and on the partition's own state: the names must match one of `allowed` (glob patterns,
`fnmatch` rules, case-sensitive), and a partition admits at most `max_per_partition`
distinct names, counted in its state (`state/task_queues.py`). A cap over the whole
cluster would need every partition's count, which no processor sees: the topics of a
namespace number at most partitions x cap.
"""

from __future__ import annotations

import dataclasses
import fnmatch

from streamproc.settings import DEFAULT_MAX_TASK_QUEUES
from streamproc.state.task_queues import TaskQueues

#: Every name: dev mode and the default.
ANY_QUEUE = "*"


@dataclasses.dataclass(frozen=True, slots=True)
class TaskQueuePolicy:
    allowed: tuple[str, ...] = (ANY_QUEUE,)
    max_per_partition: int = DEFAULT_MAX_TASK_QUEUES

    @classmethod
    def parse(cls, patterns: str, max_per_partition: int = DEFAULT_MAX_TASK_QUEUES) -> TaskQueuePolicy:
        """From `orders,payments-*` (comma separated, blanks ignored; empty means any)."""
        allowed = tuple(p.strip() for p in patterns.split(",") if p.strip())
        return cls(allowed or (ANY_QUEUE,), max_per_partition)

    def allows(self, queue: str) -> bool:
        if self.allowed == (ANY_QUEUE,):  # the default: matches any name, no pattern to run
            return True
        return any(fnmatch.fnmatchcase(queue, pattern) for pattern in self.allowed)


def admit(policy: TaskQueuePolicy, queues: TaskQueues, queue: str) -> str | None:
    """Why a command may not use task queue `queue`, or None after admitting it to `queues`.

    Admission is part of the command's writes: a command refused later for another
    reason may have admitted its queue, which only counts it against the cap early."""
    if not policy.allows(queue):
        return (f"task queue {queue!r} is not allowed on this engine "
                f"(STREAMPROC_TASK_QUEUES allows {', '.join(policy.allowed)})")
    if queues.known(queue):
        return None
    if queues.count() >= policy.max_per_partition:
        return (f"task queue {queue!r} would be more than the {policy.max_per_partition} task queues "
                f"a partition may have (STREAMPROC_MAX_TASK_QUEUES)")
    queues.add(queue)
    return None
