"""The CLI's one error boundary: whatever goes wrong is one line on stderr and exit code 1
(2 for a usage error, as click gives it), never a traceback.

Errors the user can act on (a broker that does not answer, a port in use, a refused
command, the local broker failing to start) say so in their own words; anything else is
named by its type and message. ``STREAMPROC_TRACEBACK=1`` lets the traceback through, for
a bug report.
"""

from __future__ import annotations

import errno
import os
from typing import Any

import click
from confluent_kafka import KafkaException

from streamproc.devenv.broker_errors import BrokerError
from streamproc.exceptions import CommandRejectedError, CommandsNotDeliveredError, FailureError, RequestNotSentError
from streamproc.kafka.errors import IdentityConflict, StartRefused
from streamproc.kafka.user_config import KafkaConfigError

#: Errors whose message is already written for the person at the shell (a ValueError is a
#: value refused with its reason: a setting, an argument the SDK checks, Temporal's
#: `InvalidArgument`).
_ACTIONABLE = (CommandRejectedError, CommandsNotDeliveredError, FailureError, RequestNotSentError, IdentityConflict,
               StartRefused, KafkaConfigError, TimeoutError, ValueError)

class StreamprocGroup(click.Group):
    """The root group: runs the command under `one_line_errors`."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except Exception as exc:  # noqa: BLE001 - the boundary: every error becomes one line
            if os.environ.get("STREAMPROC_TRACEBACK"):
                raise
            raise click.ClickException(one_line(exc)) from None


def one_line(exc: BaseException) -> str:
    """What `exc` says, on one line, worded for the person at the shell."""
    if isinstance(exc, BrokerError):  # its log tail is in the broker's log file, named in the message
        message = f"local broker: {exc.message}"
    elif isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
        message = f"address already in use: {exc.strerror or exc} (choose another port, or stop what listens there)"
    elif isinstance(exc, KafkaException) and exc.args:
        error = exc.args[0]
        message = f"Kafka: {error.name()}: {error.str()}" if hasattr(error, "str") else f"Kafka: {error}"
    elif isinstance(exc, _ACTIONABLE):
        message = str(exc) or type(exc).__name__
    else:
        message = f"{type(exc).__name__}: {exc} (STREAMPROC_TRACEBACK=1 shows where)"
    return " ".join(message.split())
