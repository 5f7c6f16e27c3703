"""What a processor sees: the partition's state, the writer for follow-ups, the time, the limits."""

from __future__ import annotations

import dataclasses

from streamproc.engine.output import RecordWriter
from streamproc.semantics.workflow_history_limits import DEFAULT_HISTORY_LIMITS, HistoryLimits
from streamproc.state.activities import Activities
from streamproc.state.db import PendingWrites
from streamproc.state.history import History
from streamproc.state.incidents import Incidents
from streamproc.state.jobs import Jobs
from streamproc.state.keygen import KeyGenerator
from streamproc.state.workflow_timers import WorkflowTimers
from streamproc.state.workflows import Workflows


@dataclasses.dataclass(frozen=True, slots=True)
class Limits:
    """Sizes the engine refuses to go beyond, so no record it writes can exceed Kafka's limit."""

    max_command_bytes: int = 512 * 1024
    max_payload_bytes: int = 256 * 1024
    max_timeout_ms: int = 365 * 24 * 3600 * 1000
    max_retries: int = 1_000_000
    #: A workflow task's history travels in pages of at most this many bytes of events.
    max_history_page_bytes: int = 256 * 1024
    #: Event count and size limits of a workflow run's history (SEMANTICS.md 6.3).
    history: HistoryLimits = DEFAULT_HISTORY_LIMITS


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

    @property
    def now_ms(self) -> int:
        return self.out.now_ms
