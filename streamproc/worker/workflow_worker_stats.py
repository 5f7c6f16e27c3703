"""What a workflow worker did with the tasks it received (`WorkflowWorker.stats`): counts
kept by its threads as they go, read by tests, the bench and its stop log line."""

from __future__ import annotations

import dataclasses

__all__ = ["WorkflowWorkerStats"]


@dataclasses.dataclass
class WorkflowWorkerStats:
    """What this worker did with the tasks it received."""

    #: Answers sent.
    completed: int = 0
    failed: int = 0
    #: Retried attempts that failed again, left to the engine's task timeout.
    unanswered: int = 0
    #: Tasks answered from a cached instance, and cached runs that needed a replay after all.
    cache_hits: int = 0
    cache_misses: int = 0
    #: Tasks whose history came in more than one record.
    paged: int = 0
    #: Tasks that carried part of the history and needed GET_HISTORY for the rest.
    history_fetches: int = 0
    #: Records that could not be used (undecodable, not a task), and tasks missing pages.
    skipped: int = 0
    incomplete: int = 0
    #: Queries answered (from a cached run / after a replay).
    queries: int = 0
    #: Tasks the engine handed back on the replies partition (not through the queue).
    handed_back: int = 0
    #: Checkpointed local activity markers sent while their task was out
    #: (`marker_journal`), in how many JOURNAL_MARKERS commands.
    markers_journaled: int = 0
    journals_sent: int = 0
    #: Tasks answered with an activity's completion (`ride_along`; not counted in `completed`):
    #: sent, accepted, and refused (then handed back or queued).
    ride_along_sent: int = 0
    rode_along: int = 0
    ride_along_refused: int = 0
    #: Activity completions of runs this worker runs that went without their next task's
    #: answer, by reason (`ride_along.SKIP_REASONS`).
    ride_along_skipped: dict[str, int] = dataclasses.field(default_factory=dict)
