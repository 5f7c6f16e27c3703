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
    in_activity,
    info,
    is_cancelled,
    raise_complete_async,
    wait_for_cancelled,
    wait_for_cancelled_sync,
)
from streamproc.activity.context import _CompleteAsyncError  # noqa: F401 - Temporal's tests catch it by this name
from streamproc.activity.definition import ActivityDefinition, defn
from streamproc.activity.logger import LoggerAdapter, logger
from streamproc.activity import errors
from streamproc.activity.errors import *  # noqa: F401,F403 - the errors a user raises and catches
from streamproc.semantics import RetryPolicy, RetryState, TimeoutType
from streamproc.unsupported import unsupported_names

__all__ = [
    "defn",
    "ActivityDefinition",
    "Info",
    "info",
    "in_activity",
    "logger",
    "LoggerAdapter",
    "heartbeat",
    "is_cancelled",
    "raise_complete_async",
    "wait_for_cancelled",
    "wait_for_cancelled_sync",
    "RetryPolicy",
    "RetryState",
    "TimeoutType",
    *errors.__all__,
]

__getattr__ = unsupported_names(__name__, {
    "client": "activity.client() (create a Client in the activity)",
    "payload_converter": "activity.payload_converter() (the worker's DataConverter decodes by type hints)",
    "metric_meter": "SDK metric meters",
    "cancellation_details": "cancellation details (see CancelReason)",
    "ActivityCancellationDetails": "cancellation details (see CancelReason)",
    "is_worker_shutdown": "worker shutdown notices", "wait_for_worker_shutdown": "worker shutdown notices",
    "wait_for_worker_shutdown_sync": "worker shutdown notices",
    "shield_thread_cancel_exception": "thread cancel exceptions (sync activities learn of cancellation from heartbeat())",
})
