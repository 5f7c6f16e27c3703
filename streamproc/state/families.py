"""The column families of a partition database and their one-byte changelog ids.

The id prefixes every changelog key, so it must never change once released: add new
families with new ids, never renumber.
"""

from __future__ import annotations

from enum import IntEnum


class Family(IntEnum):
    META = 0          # key generator and other partition-wide values
    JOBS = 1          # job key -> job
    JOB_DEADLINES = 2  # (deadline_ms, job key) -> b"" : started jobs, ordered by timeout
    JOB_BACKOFF = 3   # (recur_at_ms, job key) -> b"" : failed jobs waiting out a retry backoff
    INCIDENTS = 4     # incident key -> incident
    ACTIVITIES = 5    # activity key -> activity (meta, attempt state, armed timer)
    ACTIVITY_TIMERS = 6  # (due_ms, activity key) -> b"" : the one armed timer per activity
    ACTIVITY_IDS = 7  # activity id -> activity key, for open activities (ids are unique among them)
    WORKFLOW_RUNS = 8  # run key -> workflow run (open or closed)
    WORKFLOW_IDS = 9  # workflow id -> run key of its current run
    WORKFLOW_RUN_IDS = 10  # run id -> run key
    WORKFLOW_HISTORY = 11  # (run key, event id) -> history event: append O(1), a page is a range scan
    WORKFLOW_TIMERS = 12  # (due_ms, run key, timer id) -> b"" : started user timers
    WORKFLOW_DEADLINES = 13  # (due_ms, run key, kind) -> b"" : task/run/execution timeouts, backoffs
    WORKFLOW_SIGNAL_REQUESTS = 14  # (run key, request id) -> b"" : signals recorded, for deduplication
    SCHEDULES = 15  # schedule id -> schedule
    SCHEDULE_DUE = 16  # (due_ms, schedule id) -> b"" : each schedule's next wake-up
    JOB_STREAMS = 17  # (len-prefixed queue, stream id) -> job stream (worker, credits, in_use, lease)
    JOB_STREAM_LEASES = 18  # (lease_until_ms, stream key) -> b"" : each stream's lease end

    @property
    def cf_name(self) -> str:
        return self.name.lower()


#: Local only, never on the changelog: what this copy of the state reflects.
LOCAL_CF = "local"
