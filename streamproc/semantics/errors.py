"""Public exceptions raised by the pure semantic functions."""

from __future__ import annotations

__all__ = ["InvalidArgument", "ScheduleSpecError"]


class InvalidArgument(ValueError):
    """A request field is invalid (Temporal's ``INVALID_ARGUMENT``).

    The message is the server's own text, word for word, because clients and tests
    match on it. For activities the engine turns this into a failed workflow task with
    cause ``BAD_SCHEDULE_ACTIVITY_ATTRIBUTES``; for a workflow start it is returned to
    the caller.
    """


class ScheduleSpecError(InvalidArgument):
    """A schedule spec was refused (CreateSchedule/UpdateSchedule's ``INVALID_ARGUMENT``).

    ``reason`` is Temporal's own text (``CronString does not have 5-7 fields``); the
    message adds the server's prefix, as a Temporal client would see it.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"Invalid schedule spec: {reason}")
        self.reason = reason
