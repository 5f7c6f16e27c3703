"""Activities, as in Temporal's Python SDK::

    from streamproc import activity

    @activity.defn
    def charge(order_id: str, amount: int) -> dict:
        activity.heartbeat("charging")
        if amount <= 0:
            raise activity.ApplicationError("bad amount", type="InvalidAmount", non_retryable=True)
        return {"order": order_id, "attempt": activity.info().attempt}

A worker (`streamproc.worker.ActivityWorker`) runs them; a client
(`streamproc.client.ActivityClient`) schedules them and waits for their results.
"""

from streamproc.activity.context import (
    Info,
    heartbeat,
    info,
    is_cancelled,
    wait_for_cancelled,
    wait_for_cancelled_sync,
)
from streamproc.activity.definition import ActivityDefinition, defn
from streamproc.activity import errors
from streamproc.activity.errors import *  # noqa: F401,F403 - the errors a user raises and catches
from streamproc.semantics import RetryPolicy, RetryState, TimeoutType

__all__ = [
    "defn",
    "ActivityDefinition",
    "Info",
    "info",
    "heartbeat",
    "is_cancelled",
    "wait_for_cancelled",
    "wait_for_cancelled_sync",
    "RetryPolicy",
    "RetryState",
    "TimeoutType",
    *errors.__all__,
]
