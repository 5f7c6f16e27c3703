"""Jobs of a partition: the job itself and the two due-date indexes (timeouts, backoffs).

The indexes are written to the local RocksDB beside the job, but not to the changelog: a
restore rebuilds them from the job documents (`job_due_dates`, `derived_index.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import orjson

from streamproc.state.db import PartitionDb, PendingWrites, Write
from streamproc.state.families import Family
from streamproc.state.keys import read_time_key, time_key, time_upper_bound, u64


class JobState(StrEnum):
    """Where a job is in its lifecycle; a completed or canceled job is removed from state."""

    ACTIVATABLE = "ACTIVATABLE"  # published on its task queue, waiting for a START
    STARTED = "STARTED"          # a worker runs it; times out at deadline_ms
    FAILED = "FAILED"            # waiting out a retry backoff, or out of retries (incident)


@dataclass(slots=True)
class Job:
    """A job as the engine keeps it: its JobRecord fields (events and task records carry
    them, `record()`), plus what a repeated START and an open incident need. Stored as one
    JSON document with the same keys the engine has always written."""

    type: str
    payload: str
    retries: int
    timeout_ms: int
    result: str | None = None
    attempt: int = 1
    worker: str = ""
    #: When the started attempt times out (-1: not started).
    deadline_ms: int = -1
    error_message: str = ""
    retry_backoff_ms: int = 0
    #: When a failed job's backoff ends (-1: none).
    recur_at_ms: int = -1
    state: JobState = JobState.ACTIVATABLE
    #: The request id of the START that started the attempt: the same START sent again is
    #: answered again instead of refused.
    start_request_id: str | None = None
    #: The incident opened when it failed out of retries.
    incident_key: int | None = None
    #: The job stream its started attempt was pushed to (`job_streams.py`), whose credit it holds.
    stream: str | None = None
    #: Whether the document has a start_request_id (a job never started has none).
    _has_start_request_id: bool = field(default=False, repr=False)

    @classmethod
    def created(cls, value: dict[str, Any]) -> Job:
        """A new job from a CREATE command's value (its type, payload, retries, timeout)."""
        return cls(type=value["type"], payload=value["payload"], retries=value["retries"],
                   timeout_ms=value["timeout_ms"])

    # lifecycle (the `Jobs` methods keep the due-date indexes in step) -------------------
    def mark_started(self, worker: str, deadline_ms: int, request_id: str | None, stream: str | None) -> None:
        self.state, self.worker, self.deadline_ms, self.stream = JobState.STARTED, worker, deadline_ms, stream
        self.start_request_id, self._has_start_request_id = request_id, True

    def mark_activatable(self, next_attempt: bool) -> None:
        self.state, self.deadline_ms, self.recur_at_ms, self.worker = JobState.ACTIVATABLE, -1, -1, ""
        self.start_request_id, self._has_start_request_id = None, True
        if next_attempt:
            self.attempt += 1

    def mark_failed(self, recur_at_ms: int) -> None:
        self.state, self.deadline_ms, self.recur_at_ms = JobState.FAILED, -1, recur_at_ms

    def is_repeated_start(self, attempt: int, request_id: str | None) -> bool:
        """Whether a START is the one that started the current attempt, sent again."""
        return (request_id is not None and self.state is JobState.STARTED and self.attempt == attempt
                and self.start_request_id == request_id)

    def record(self, closed_as: str | None = None) -> dict[str, Any]:
        """The JobRecord value of an event or task record; `closed_as`: the intent of a job
        that ends here (COMPLETED, CANCELED), which its event shows as the state."""
        value = self.to_json()
        if closed_as is not None:
            value["state"] = closed_as
        return value

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "type": self.type, "payload": self.payload, "result": self.result, "retries": self.retries,
            "timeout_ms": self.timeout_ms, "attempt": self.attempt, "worker": self.worker,
            "deadline_ms": self.deadline_ms, "error_message": self.error_message,
            "retry_backoff_ms": self.retry_backoff_ms, "recur_at_ms": self.recur_at_ms, "state": self.state.value}
        if self._has_start_request_id:
            doc["start_request_id"] = self.start_request_id
        if self.incident_key is not None:
            doc["incident_key"] = self.incident_key
        if self.stream is not None:
            doc["stream"] = self.stream
        return doc

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Job:
        return cls(type=d["type"], payload=d["payload"], retries=d["retries"], timeout_ms=d["timeout_ms"],
                   result=d["result"], attempt=d["attempt"], worker=d["worker"], deadline_ms=d["deadline_ms"],
                   error_message=d["error_message"], retry_backoff_ms=d["retry_backoff_ms"],
                   recur_at_ms=d["recur_at_ms"], state=JobState(d["state"]),
                   start_request_id=d.get("start_request_id"), incident_key=d.get("incident_key"), stream=d.get("stream"),
                   _has_start_request_id="start_request_id" in d)


_JOB_DEADLINES = Family.JOB_DEADLINES
_JOB_BACKOFF = Family.JOB_BACKOFF


def job_due_dates(key: int, document: dict[str, Any]) -> set[Write]:
    """The index entries a stored job document implies, as `Jobs` writes them: its started
    attempt's deadline (a STARTED job's `deadline_ms`) and its backoff's end (a FAILED
    job's `recur_at_ms`); -1 is none. A restore rebuilds the indexes with it."""
    entries: set[Write] = set()
    if document["deadline_ms"] >= 0:
        entries.add((_JOB_DEADLINES, time_key(document["deadline_ms"], key)))
    if document["recur_at_ms"] >= 0:
        entries.add((_JOB_BACKOFF, time_key(document["recur_at_ms"], key)))
    return entries


class Jobs:
    """Job reads and writes for processors: every method keeps the indexes consistent."""

    def __init__(self, writes: PendingWrites) -> None:
        self._w = writes

    def get(self, key: int) -> Job | None:
        raw = self._w.get(Family.JOBS, u64(key))
        return Job.from_json(orjson.loads(raw)) if raw is not None else None

    def put(self, key: int, job: Job) -> None:
        self._w.put(Family.JOBS, u64(key), orjson.dumps(job.to_json()))

    def remove(self, key: int, job: Job) -> None:
        """Forget a job that has ended, with whatever due date it still had."""
        self._clear_due_dates(key, job)
        self._w.delete(Family.JOBS, u64(key))

    def start(self, key: int, job: Job, worker: str, deadline_ms: int, request_id: str | None = None,
              stream: str | None = None) -> None:
        """Started by `worker` until `deadline_ms`; `request_id` of the START, so that the same
        command sent again is recognised; `stream`: the job stream it was pushed to, if it was."""
        job.mark_started(worker, deadline_ms, request_id, stream)
        self._w.put(Family.JOB_DEADLINES, time_key(deadline_ms, key), b"")
        self.put(key, job)

    def make_activatable(self, key: int, job: Job, *, next_attempt: bool) -> None:
        """Back to startable (after creation, a timeout, a retry or a backoff)."""
        self._clear_due_dates(key, job)
        job.mark_activatable(next_attempt)
        self.put(key, job)

    def fail(self, key: int, job: Job, recur_at_ms: int) -> None:
        """Failed: wait for the backoff to pass (recur_at_ms >= 0) or for new retries (-1)."""
        self._clear_due_dates(key, job)
        job.mark_failed(recur_at_ms)
        if recur_at_ms >= 0:
            self._w.put(Family.JOB_BACKOFF, time_key(recur_at_ms, key), b"")
        self.put(key, job)

    def forget_due_date(self, field: str, due_ms: int, key: int) -> None:
        """Drop an index entry that no job document implies (`deadline_ms` or `recur_at_ms`
        at `due_ms`): a deleted key that is not there writes nothing to the changelog, which
        leaves these indexes out."""
        self._w.delete(_JOB_DEADLINES if field == "deadline_ms" else _JOB_BACKOFF, time_key(due_ms, key))

    def _clear_due_dates(self, key: int, job: Job) -> None:
        # Whatever is >= 0 in the document is indexed (`job_due_dates` rebuilds it so).
        if job.deadline_ms >= 0:
            self._w.delete(Family.JOB_DEADLINES, time_key(job.deadline_ms, key))
        if job.recur_at_ms >= 0:
            self._w.delete(Family.JOB_BACKOFF, time_key(job.recur_at_ms, key))


class JobDueDates:
    """Read-only view of committed due dates for the checker: ordered, upper-bounded scans."""

    def __init__(self, db: PartitionDb) -> None:
        self._db = db

    def timed_out(self, now_ms: int, limit: int) -> list[tuple[int, int]]:
        """(deadline_ms, job key) of started jobs whose deadline is strictly before now."""
        return self._due(Family.JOB_DEADLINES, now_ms, limit)

    def backoff_over(self, now_ms: int, limit: int) -> list[tuple[int, int]]:
        """(recur_at_ms, job key) of failed jobs whose backoff ended strictly before now."""
        return self._due(Family.JOB_BACKOFF, now_ms, limit)

    def any_out(self) -> bool:
        """Whether some job is on its task queue or started (a failed one waits out its
        backoff, or its incident)."""
        return any(orjson.loads(raw)["state"] != JobState.FAILED for _, raw in self._db.scan(Family.JOBS))

    def next_due_ms(self) -> int | None:
        """The earliest time at which something will be due, or None."""
        times = []
        for family in (Family.JOB_DEADLINES, Family.JOB_BACKOFF):
            first = self._db.first_key(family)
            if first is not None:
                times.append(read_time_key(first)[0])
        return min(times) if times else None

    def _due(self, family: Family, now_ms: int, limit: int) -> list[tuple[int, int]]:
        bound = time_upper_bound(now_ms)
        return [read_time_key(k) for k, _ in self._db.scan(family, bound, limit)]
