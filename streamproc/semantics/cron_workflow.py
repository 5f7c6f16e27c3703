"""Cron workflows: what Temporal does with the ``cron_schedule`` of a workflow start
(SEMANTICS.md 7): refuse one that does not parse or never fires, and compute each run's
wait (``GetBackoffForNextSchedule``). The syntax is :mod:`~streamproc.semantics.robfig_cron`.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from streamproc.semantics.errors import InvalidArgument
from streamproc.semantics.robfig_cron import CronSchedule, CronSyntaxError, parse_cron_schedule

__all__ = ["INVALID_CRON_SCHEDULE", "NO_TIME_CAN_BE_FOUND", "validate_cron_schedule", "cron_backoff"]

#: Temporal's answer to a start whose cron schedule does not parse.
INVALID_CRON_SCHEDULE = "invalid CronSchedule."
#: ... and to one that parses but never fires.
NO_TIME_CAN_BE_FOUND = "invalid CronSchedule, no time can be found to satisfy the schedule"


def validate_cron_schedule(spec: str, now: datetime) -> CronSchedule | None:
    """Check a start request's ``cron_schedule`` (``""``: none) at ``now``.

    Raises :class:`InvalidArgument` with Temporal's texts: :data:`INVALID_CRON_SCHEDULE`
    when it does not parse, :data:`NO_TIME_CAN_BE_FOUND` when it has no time in the next
    five years (e.g. ``0 0 31 2 *``).
    """
    if not spec:
        return None
    try:
        schedule = parse_cron_schedule(spec)
    except CronSyntaxError:
        raise InvalidArgument(INVALID_CRON_SCHEDULE) from None
    if schedule.next_after(now) is None:
        raise InvalidArgument(NO_TIME_CAN_BE_FOUND)
    return schedule


def cron_backoff(spec: str, scheduled: datetime, now: datetime) -> timedelta | None:
    """``GetBackoffForNextSchedule``: the delay from ``now`` to the next cron time,
    rounded up to a whole second; ``None`` when there is no cron (empty or invalid
    spec, or no future time), which ends a cron chain.

    ``scheduled`` is the previous run's execution time (for the first run, ``now``).
    If ``now`` is before it, it is the next time itself; else the next time is the
    first of ``Next(scheduled), Next(Next(scheduled)), ...`` not before ``now``: missed
    runs are skipped, never caught up.
    """
    if not spec:
        return None
    try:
        schedule = parse_cron_schedule(spec)
    except CronSyntaxError:
        return None
    if now < scheduled:
        following: datetime | None = scheduled
    else:
        following = schedule.first_at_or_after(now, after=scheduled)
    if following is None:
        return None
    microseconds = (following - now) // timedelta(microseconds=1)
    return timedelta(seconds=-(-microseconds // 1_000_000))
