"""The exceptions of activities, workers and clients (defined in :mod:`streamproc.exceptions`).

An activity raises :class:`ApplicationError` (or anything else) to fail its attempt, and
:class:`CancelledError` to acknowledge a cancellation. A caller waiting for the result
gets :class:`ActivityError` whose ``cause`` is what ended the activity:
:class:`ApplicationError`, :class:`TimeoutError` or :class:`CancelledError`, each with
its own cause chain. ``InvalidArgument`` is the semantics' own class, so the client's
check and the engine's rejection raise the same exception with the same text.
"""

from __future__ import annotations

from streamproc.exceptions import (
    ActivityAlreadyStartedError,
    ActivityError,
    ApplicationError,
    CancelledError,
    CommandRejectedError,
    FailureError,
    InvalidArgument,
    ServerError,
    TerminatedError,
    TimeoutError,
)

__all__ = [
    "FailureError",
    "ApplicationError",
    "CancelledError",
    "TimeoutError",
    "TerminatedError",
    "ServerError",
    "ActivityError",
    "ActivityAlreadyStartedError",
    "CommandRejectedError",
    "InvalidArgument",
]
