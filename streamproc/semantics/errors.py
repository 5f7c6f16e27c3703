"""Public exceptions raised by the pure semantic functions."""

from __future__ import annotations

__all__ = ["InvalidArgument"]


class InvalidArgument(ValueError):
    """A request field is invalid (Temporal's ``INVALID_ARGUMENT``).

    The message is the server's own text, word for word, because clients and tests
    match on it. For activities the engine turns this into a failed workflow task with
    cause ``BAD_SCHEDULE_ACTIVITY_ATTRIBUTES``; for a workflow start it is returned to
    the caller.
    """
