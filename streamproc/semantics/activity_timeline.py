"""Play an activity forward against a scripted worker.

:func:`run_activity_timeline` feeds the transitions of
:mod:`streamproc.semantics.activity_attempts` with worker actions and timer firings in
time order, and reports every attempt and the final outcome. It is how the timeline
vectors of SEMANTICS.md 2.6 are checked, and a reference for the order in which a
processor should apply events: when a timer and a worker action fall on the same
instant, the timer wins (a deadline is reached *at* its instant).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from streamproc.semantics.activity_attempts import (
    ActivityOutcome,
    ActivityRetry,
    ActivityState,
    complete_attempt,
    fail_attempt,
    fire_activity_timeout,
    next_activity_deadline,
    record_heartbeat,
    start_attempt,
)
from streamproc.semantics.durations import ZERO
from streamproc.semantics.failures import Failure

__all__ = ["AttemptPlan", "AttemptRecord", "ActivityTimeline", "run_activity_timeline"]


@dataclass(frozen=True)
class AttemptPlan:
    """What the worker does with one attempt, in offsets.

    ``pickup_after``: delay from the attempt becoming due to a worker starting it
    (``None``: nobody ever polls). ``heartbeats_after`` and ``finishes_after`` are
    offsets from the start. When the attempt finishes it fails with ``failure``, or
    completes if ``failure`` is ``None``; ``finishes_after=None`` means it hangs.
    """

    pickup_after: timedelta | None = ZERO
    heartbeats_after: tuple[timedelta, ...] = ()
    finishes_after: timedelta | None = None
    failure: Failure | None = None


@dataclass(frozen=True)
class AttemptRecord:
    """How one attempt went.

    ``failure`` is what ended it (a timeout failure built by the server, or the
    worker's failure; ``None`` if it completed). ``next_due`` is when the following
    attempt became due, ``None`` for the last attempt.
    """

    attempt: int
    scheduled_time: datetime
    started_time: datetime | None
    ended_time: datetime
    failure: Failure | None
    retry_delay: timedelta | None
    next_due: datetime | None


@dataclass(frozen=True)
class ActivityTimeline:
    """Every attempt, the closing outcome (``None`` if the activity was still pending
    when nothing more could happen before ``run_expiration``), and the last state."""

    attempts: tuple[AttemptRecord, ...]
    outcome: ActivityOutcome | None
    final_state: ActivityState


def run_activity_timeline(
    state: ActivityState,
    plans: Sequence[AttemptPlan] | Callable[[int], AttemptPlan],
    *,
    run_expiration: datetime | None = None,
    max_attempts: int = 10_000,
) -> ActivityTimeline:
    """Run ``state`` until it closes, using ``plans`` for the worker.

    ``plans`` is indexed by attempt number (1-based); a sequence shorter than the
    number of attempts repeats its last plan. ``max_attempts`` guards against a policy
    that would retry forever against a worker that always fails.
    """
    if callable(plans):
        plan_for = plans
    else:
        if not plans:
            raise ValueError("plans must not be empty")
        plan_for = lambda attempt: plans[min(attempt, len(plans)) - 1]  # noqa: E731

    records: list[AttemptRecord] = []
    while len(records) < max_attempts:
        plan = plan_for(state.attempt)
        attempt_scheduled = state.scheduled_time
        beats_done = 0
        while True:
            deadline = next_activity_deadline(state, run_expiration)
            action_time, action = _next_worker_action(state, plan, beats_done)
            if deadline is not None and (action_time is None or deadline.at <= action_time):
                when = deadline.at
                result = fire_activity_timeout(state, deadline.timeout_type, when)
            elif action_time is not None and (
                run_expiration is None or action_time <= run_expiration
            ):
                when = action_time
                if action == "start":
                    state = start_attempt(state, when)
                    continue
                if action == "heartbeat":
                    state = record_heartbeat(state, when)
                    beats_done += 1
                    continue
                if plan.failure is None:
                    result = complete_attempt(state, when)
                else:
                    result = fail_attempt(state, plan.failure, when)
            else:
                return ActivityTimeline(tuple(records), None, state)

            assert result is not None, "a deadline taken from the state cannot be stale"
            started = state.started_time
            retry = result if isinstance(result, ActivityRetry) else None
            records.append(
                AttemptRecord(
                    attempt=state.attempt,
                    scheduled_time=attempt_scheduled,
                    started_time=started,
                    ended_time=when,
                    failure=getattr(result, "failure", None),
                    retry_delay=retry.delay if retry else None,
                    next_due=retry.state.scheduled_time if retry else None,
                )
            )
            if retry is not None:
                state = retry.state
                break
            return ActivityTimeline(tuple(records), result, state)
    raise RuntimeError(f"activity still retrying after {max_attempts} attempts")


def _next_worker_action(
    state: ActivityState, plan: AttemptPlan, beats_done: int
) -> tuple[datetime | None, str]:
    if state.started_time is None:
        if plan.pickup_after is None:
            return None, ""
        return state.scheduled_time + plan.pickup_after, "start"
    beats = sorted(plan.heartbeats_after)
    finish = None if plan.finishes_after is None else state.started_time + plan.finishes_after
    if beats_done < len(beats):
        beat = state.started_time + beats[beats_done]
        if finish is None or beat <= finish:
            return beat, "heartbeat"
    if finish is not None:
        return finish, "finish"
    return None, ""
