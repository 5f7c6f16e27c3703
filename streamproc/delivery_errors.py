"""Whether a client's command reached the log, when the client cannot tell from an answer.

Three outcomes a caller must tell apart: certainly not sent (`RequestNotSentError`: send
again), maybe applied (`RequestOutcomeUnknownError`: look the outcome up first), and a
flush that could not settle every delivery (`CommandsNotDeliveredError`). Defined here,
exported (and documented) by `streamproc.exceptions`: import them from there.
"""

from __future__ import annotations

import builtins


class RequestOutcomeUnknownError(builtins.TimeoutError):
    """A request's deadline passed without the engine's answer, and its command may have
    reached the log: it may have been applied, or may still be. Look the outcome up
    (its `request_id` is in the events it produced) instead of assuming it failed.

    ``delivered`` is True when a copy of the command is known to be on the log (the engine
    will process it), None when no copy is known either way (the broker was away). A copy
    still in the producer may reach the log until ``may_land_until`` (``time.time()``
    seconds; its message timeout), never later."""

    def __init__(self, message: str, *, intent: str, request_id: str, delivered: bool | None,
                 may_land_until: float) -> None:
        super().__init__(message)
        self.intent = intent
        self.request_id = request_id
        self.delivered = delivered
        self.may_land_until = may_land_until


class WorkflowStartOutcomeUnknownError(RequestOutcomeUnknownError):
    """A start without an answer that may have started the run: look it up with
    ``client.get_workflow_handle(workflow_id).describe()``, or start again with the same
    ``request_id``, which the engine answers with the run that request started."""

    def __init__(self, message: str, *, workflow_id: str, workflow_type: str, **kwargs) -> None:
        super().__init__(message, **kwargs)
        self.workflow_id = workflow_id
        self.workflow_type = workflow_type


class RequestNotSentError(Exception):
    """The command certainly never reached the log (the producer refused it, the broker
    refused it for good, or the topic could not be found before the deadline): nothing
    happened, and sending it again is safe."""

    def __init__(self, message: str, *, intent: str, request_id: str) -> None:
        super().__init__(message)
        self.intent = intent
        self.request_id = request_id


class WorkflowNotStartedError(RequestNotSentError):
    """The START never reached the log: no run was started by it."""

    def __init__(self, message: str, *, workflow_id: str, **kwargs) -> None:
        super().__init__(message, **kwargs)
        self.workflow_id = workflow_id


class CommandsNotDeliveredError(RuntimeError, builtins.TimeoutError):
    """`Client.flush` found commands that are not known to be on the log (a RuntimeError
    and a TimeoutError, what flush raised before for failed and for unfinished deliveries).

    ``unknown``: request ids (or ``key:<job key>`` for commands about an existing job) of
    commands that may be on the log or may still get there (a timed-out or unfinished
    delivery); look them up before sending them again. ``not_sent``: those certainly not
    on the log, with the reason; sending them again is safe."""

    def __init__(self, unknown: list[str], not_sent: dict[str, str]) -> None:
        parts = []
        if unknown:
            parts.append(f"{len(unknown)} with an unknown outcome (first {unknown[0]})")
        if not_sent:
            first = next(iter(not_sent.items()))
            parts.append(f"{len(not_sent)} not sent (first {first[0]}: {first[1]})")
        super().__init__("commands not delivered: " + "; ".join(parts))
        self.unknown = unknown
        self.not_sent = not_sent
