"""The engine's bounds for faults, shared by its recovery and its watchdog."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FaultPolicy"]


@dataclass(frozen=True)
class FaultPolicy:
    """The engine's bounds for faults (seconds)."""

    #: a commit may take the transaction timeout plus this before it is abandoned
    commit_margin_s: float = 5.0
    backoff_min_s: float = 0.1
    backoff_max_s: float = 2.0
    #: the watchdog: a stage stuck, or commits failing, this long is reported ...
    stall_after_s: float = 15.0
    #: ... once per this interval ...
    stall_log_interval_s: float = 15.0
    #: ... and after this long the Kafka clients are replaced.
    rebuild_after_s: float = 60.0
    #: Failing this long, the watchdog asks a new client of its own whether the broker
    #: answers (every `broker_probe_interval_s`) ...
    broker_probe_after_s: float = 10.0
    broker_probe_interval_s: float = 2.0
    #: ... and when the broker has answered it this long while the engine still fails, the
    #: engine's clients are the ones stuck: they are replaced then, not after `rebuild_after_s`.
    #: Long enough for the engine's own recovery (a static consumer's rejoin, a resumed
    #: init_transactions: 5-7 s after a frozen broker went on, on a loaded machine); after 4 s
    #: a rebuild was seen to undo a recovery that was about to commit.
    rebuild_when_answering_s: float = 10.0
    conflict_limit: int = 3
    conflict_window_s: float = 60.0
    #: A consumer fencing counts towards a conflict only this long after every broker was lost.
    consumer_fencing_after_s: float = 30.0
    #: The consumer is replaced after this many timed-out calls without a commit between.
    consumer_timeouts_limit: int = 2
    #: Both producers are replaced after a producer call (init or abort) was resumed this many
    #: times in a row without finishing.
    producer_resumes_limit: int = 2
