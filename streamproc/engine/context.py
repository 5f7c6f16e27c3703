"""What a processor sees: the partition's state, the writer for follow-ups, the time, the limits."""

from __future__ import annotations

import dataclasses

from streamproc.engine.output import RecordWriter
from streamproc.state.activities import Activities
from streamproc.state.incidents import Incidents
from streamproc.state.jobs import Jobs
from streamproc.state.keygen import KeyGenerator


@dataclasses.dataclass(frozen=True, slots=True)
class Limits:
    """Sizes the engine refuses to go beyond, so no record it writes can exceed Kafka's limit."""

    max_command_bytes: int = 512 * 1024
    max_payload_bytes: int = 256 * 1024
    max_timeout_ms: int = 365 * 24 * 3600 * 1000
    max_retries: int = 1_000_000


@dataclasses.dataclass(slots=True)
class ProcessingContext:
    jobs: Jobs
    incidents: Incidents
    keys: KeyGenerator
    out: RecordWriter
    limits: Limits
    activities: Activities

    @property
    def now_ms(self) -> int:
        return self.out.now_ms
