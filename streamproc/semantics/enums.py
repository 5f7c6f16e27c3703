"""Temporal enums used by the retry and timeout semantics, with Temporal's numbers.

Member names follow the Temporal Python SDK (``RetryState.IN_PROGRESS``); the protobuf
names (``RETRY_STATE_IN_PROGRESS``) are available as ``proto_name``.
"""

from __future__ import annotations

from streamproc.semantics.temporal_enum import TemporalEnum

__all__ = ["RetryState", "TimeoutType"]


class RetryState(TemporalEnum):
    """Why an activity or workflow stopped retrying, or that it still is."""

    UNSPECIFIED = 0
    IN_PROGRESS = 1
    NON_RETRYABLE_FAILURE = 2
    TIMEOUT = 3
    MAXIMUM_ATTEMPTS_REACHED = 4
    RETRY_POLICY_NOT_SET = 5
    INTERNAL_SERVER_ERROR = 6
    CANCEL_REQUESTED = 7


_TIMEOUT_SHORT_NAMES = {
    0: "Unspecified",
    1: "StartToClose",
    2: "ScheduleToStart",
    3: "ScheduleToClose",
    4: "Heartbeat",
}


class TimeoutType(TemporalEnum):
    """Which clock ran out. The numbers order timers that fall due at the same instant."""

    UNSPECIFIED = 0
    START_TO_CLOSE = 1
    SCHEDULE_TO_START = 2
    SCHEDULE_TO_CLOSE = 3
    HEARTBEAT = 4

    @property
    def short_name(self) -> str:
        """The PascalCase name used in messages and in ``TemporalTimeout:<name>``."""
        return _TIMEOUT_SHORT_NAMES[self.value]

    @classmethod
    def from_name(cls, name: str) -> TimeoutType:
        """Parse either spelling the server accepts: ``StartToClose`` or
        ``TIMEOUT_TYPE_START_TO_CLOSE`` (case-sensitive).

        Raises ``ValueError`` for anything else.
        """
        for member in cls:
            if name in (member.short_name, member.proto_name):
                return member
        raise ValueError(f"{name} is not a valid TimeoutType")
