"""Jobs of a partition: the job itself and the two due-date indexes (timeouts, backoffs)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import orjson

from streamproc.state.db import PartitionDb, PendingWrites
from streamproc.state.families import Family
from streamproc.state.keys import read_time_key, time_key, time_upper_bound, u64

Job = dict[str, Any]


class JobState(StrEnum):
    """Where a job is in its lifecycle; a completed or canceled job is removed from state."""

    ACTIVATABLE = "ACTIVATABLE"  # published on its task queue, waiting for a START
    STARTED = "STARTED"          # a worker runs it; times out at deadline_ms
    FAILED = "FAILED"            # waiting out a retry backoff, or out of retries (incident)


class Jobs:
    """Job reads and writes for processors: every method keeps the indexes consistent."""

    def __init__(self, writes: PendingWrites) -> None:
        self._w = writes

    def get(self, key: int) -> Job | None:
        raw = self._w.get(Family.JOBS, u64(key))
        return orjson.loads(raw) if raw is not None else None

    def put(self, key: int, job: Job) -> None:
        self._w.put(Family.JOBS, u64(key), orjson.dumps(job))

    def remove(self, key: int, job: Job) -> None:
        """Forget a job that has ended, with whatever due date it still had."""
        self._clear_due_dates(key, job)
        self._w.delete(Family.JOBS, u64(key))

    def start(self, key: int, job: Job, worker: str, deadline_ms: int, request_id: str | None = None) -> None:
        """Started by `worker` until `deadline_ms`; `request_id` of the START, so that the same
        command sent again is recognised."""
        job.update(state=JobState.STARTED, worker=worker, deadline_ms=deadline_ms, start_request_id=request_id)
        self._w.put(Family.JOB_DEADLINES, time_key(deadline_ms, key), b"")
        self.put(key, job)

    def make_activatable(self, key: int, job: Job, *, next_attempt: bool) -> None:
        """Back to startable (after creation, a timeout, a retry or a backoff)."""
        self._clear_due_dates(key, job)
        job.update(state=JobState.ACTIVATABLE, deadline_ms=-1, recur_at_ms=-1, worker="", start_request_id=None)
        if next_attempt:
            job["attempt"] += 1
        self.put(key, job)

    def fail(self, key: int, job: Job, recur_at_ms: int) -> None:
        """Failed: wait for the backoff to pass (recur_at_ms >= 0) or for new retries (-1)."""
        self._clear_due_dates(key, job)
        job.update(state=JobState.FAILED, deadline_ms=-1, recur_at_ms=recur_at_ms)
        if recur_at_ms >= 0:
            self._w.put(Family.JOB_BACKOFF, time_key(recur_at_ms, key), b"")
        self.put(key, job)

    def _clear_due_dates(self, key: int, job: Job) -> None:
        if job.get("deadline_ms", -1) >= 0:
            self._w.delete(Family.JOB_DEADLINES, time_key(job["deadline_ms"], key))
        if job.get("recur_at_ms", -1) >= 0:
            self._w.delete(Family.JOB_BACKOFF, time_key(job["recur_at_ms"], key))


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
