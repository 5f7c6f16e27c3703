"""The processing contract: a `Processor` gets a command and a `ProcessingContext` (the
partition's state, the writer for follow-ups, the time, the limits) and answers through
them; it never sees Kafka. One processor per (value type, intent), as Zeebe's
TypedRecordProcessor; `partition.py` routes each command to its processor."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from streamproc.engine.activities.owners import owner_kind
from streamproc.engine.output import RecordWriter
from streamproc.protocol.limits import MAX_COMMAND_BYTES, MAX_PAYLOAD_BYTES
from streamproc.protocol.records import Record
from streamproc.engine.task_queues import TaskQueuePolicy, admit
from streamproc.semantics.workflow_history_limits import DEFAULT_HISTORY_LIMITS, HistoryLimits
from streamproc.state.activities import Activities
from streamproc.state.db import PendingWrites
from streamproc.state.history import History
from streamproc.state.incidents import Incidents
from streamproc.state.job_streams import JobStreams
from streamproc.state.jobs import Jobs
from streamproc.state.keygen import KeyGenerator
from streamproc.state.schedules import Schedules
from streamproc.state.task_queues import TaskQueues
from streamproc.state.workflow_timers import WorkflowTimers
from streamproc.state.workflows import Workflows

if TYPE_CHECKING:
    from streamproc.engine.activities.owners import ActivityOwner
    from streamproc.settings import Settings


@dataclasses.dataclass(frozen=True, slots=True)
class Limits:
    """Sizes the engine refuses to go beyond, so no record it writes can exceed Kafka's limit."""

    max_command_bytes: int = MAX_COMMAND_BYTES
    max_payload_bytes: int = MAX_PAYLOAD_BYTES
    max_timeout_ms: int = 365 * 24 * 3600 * 1000
    max_retries: int = 1_000_000
    #: A workflow task's history travels in pages of at most this many bytes of events.
    max_history_page_bytes: int = 256 * 1024
    #: Signals one run may record (Temporal's default per-execution limit).
    max_signals_per_run: int = 10_000
    #: Updates of one run not completed yet, and in all (Temporal's defaults).
    max_in_flight_updates: int = 10
    max_updates_per_run: int = 2_000
    #: Event count and size limits of a workflow run's history (SEMANTICS.md 6.3).
    history: HistoryLimits = DEFAULT_HISTORY_LIMITS
    #: The task queues commands may name (STREAMPROC_TASK_QUEUES, STREAMPROC_MAX_TASK_QUEUES).
    task_queues: TaskQueuePolicy = TaskQueuePolicy()

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        """The defaults, with what the operator configured."""
        return cls(task_queues=TaskQueuePolicy.parse(settings.task_queues, settings.max_task_queues))


@dataclasses.dataclass(slots=True)
class ProcessingContext:
    jobs: Jobs
    incidents: Incidents
    keys: KeyGenerator
    out: RecordWriter
    limits: Limits
    activities: Activities
    workflows: Workflows
    history: History
    workflow_timers: WorkflowTimers
    #: The command's staged writes: discarded when a workflow's history limit is crossed.
    writes: PendingWrites
    #: Who each kind of activity reports to (`engine/activities/owners.py`), wired by the partition.
    activity_owners: Mapping[str, ActivityOwner]
    schedules: Schedules
    #: The topics' namespace: part of a schedule's jitter seed and of its identity.
    namespace: str = "streamproc"
    #: The partition's admitted task queues (made from `writes` when not given).
    task_queues: TaskQueues | None = None
    #: The workers' job streams, that startable jobs are pushed to (made from `writes` when not given).
    job_streams: JobStreams | None = None

    def __post_init__(self) -> None:
        if self.task_queues is None:
            self.task_queues = TaskQueues(self.writes)
        if self.job_streams is None:
            self.job_streams = JobStreams(self.writes)

    @property
    def now_ms(self) -> int:
        return self.out.now_ms

    def activity_owner(self, meta: dict) -> ActivityOwner:
        return self.activity_owners[owner_kind(meta)]

    def admit_task_queue(self, queue: str) -> str | None:
        """Why this command may not use task queue `queue`, or None after admitting it
        (see `task_queues.py`)."""
        return admit(self.limits.task_queues, self.task_queues, queue)


#: One per (value type, intent): validates the command against the state, changes the
#: state through intention-revealing methods, writes events, rejections and follow-ups.
Processor = Callable[[Record, ProcessingContext], None]
