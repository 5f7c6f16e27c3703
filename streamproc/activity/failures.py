"""Exceptions to FailureRecords (what a worker reports) and back (what a caller raises).

A worker reports what the activity raised as Temporal's SDK does: an ApplicationError
keeps its type, details and retry hints; any other exception fails the attempt with its
class name as the type, so ``non_retryable_error_types=["ValueError"]`` works; a
CancelledError is a CANCELED failure. ``__cause__`` chains become ``cause`` chains.
"""

from __future__ import annotations

import traceback
from datetime import timedelta
from typing import Any

from streamproc.activity import errors
from streamproc.converter import DataConverter
from streamproc.protocol.wire_values import ceil_ms
from streamproc.semantics import TimeoutType

__all__ = ["failure_from_exception", "exception_from_failure", "attempt_failure"]

#: Causes nest; a cycle or an absurd chain must not blow the stack (as the engine's codec).
_MAX_DEPTH = 20
#: Enough to find the line; a deep recursion must not make the record too big to send.
_MAX_STACK_TRACE = 8000


def failure_from_exception(exc: BaseException, depth: int = 0, *,
                           converter: DataConverter | None = None) -> dict[str, Any]:
    """The FailureRecord a worker sends for an exception raised by activity code; its
    details go through `converter` (the default one if None)."""
    converter = converter or DataConverter.default()
    record: dict[str, Any] = {
        "message": str(exc), "kind": "APPLICATION", "type": type(exc).__name__,
        "non_retryable": False, "next_retry_delay_ms": -1, "timeout_type": "",
        "details": None, "stack_trace": _stack_trace(exc), "cause": None,
    }
    if isinstance(exc, errors.FailureError):
        record["message"] = exc.message
    if isinstance(exc, errors.ApplicationError):
        record.update(type=exc.type or type(exc).__name__, non_retryable=exc.non_retryable,
                      details=_details(exc.details, converter))
        if exc.next_retry_delay is not None:
            # A positive delay under a millisecond must not become "retry at once".
            record["next_retry_delay_ms"] = max(0, ceil_ms(exc.next_retry_delay))
    elif isinstance(exc, errors.CancelledError):
        record.update(kind="CANCELED", type="", details=_details(exc.details, converter))
    cause = exc.__cause__
    if cause is not None and depth < _MAX_DEPTH:
        record["cause"] = failure_from_exception(cause, depth + 1, converter=converter)
    return record


def attempt_failure(exc: BaseException, converter: DataConverter) -> dict[str, Any]:
    """The FailureRecord of an attempt that raised `exc`, even when its details cannot be
    encoded (the attempt still fails, and the message says why)."""
    try:
        return failure_from_exception(exc, converter=converter)
    except TypeError as bad:
        return failure_from_exception(errors.ApplicationError(
            f"{type(exc).__name__}: {exc} (its details could not be encoded: {bad})",
            type=getattr(exc, "type", None) or type(exc).__name__,
            non_retryable=bool(getattr(exc, "non_retryable", False))))


def exception_from_failure(record: dict[str, Any] | None, depth: int = 0, *,
                           converter: DataConverter | None = None) -> errors.FailureError | None:
    """The exception a caller sees for a FailureRecord, with its causes as ``__cause__``."""
    if record is None or depth > _MAX_DEPTH:
        return None
    decode_details = (converter or DataConverter.default()).decode_details
    message = record.get("message", "")
    kind = record.get("kind", "APPLICATION")
    exc: errors.FailureError
    if kind == "APPLICATION":
        delay_ms = record.get("next_retry_delay_ms", -1)
        exc = errors.ApplicationError(
            message, *decode_details(record.get("details")), type=record.get("type") or None,
            non_retryable=bool(record.get("non_retryable")),
            next_retry_delay=timedelta(milliseconds=delay_ms) if delay_ms >= 0 else None,
            failure=record)
    elif kind == "TIMEOUT":
        name = record.get("timeout_type") or "UNSPECIFIED"
        exc = errors.TimeoutError(
            message, type=TimeoutType[name] if name in TimeoutType.__members__ else None,
            last_heartbeat_details=decode_details(record.get("details")), failure=record)
    elif kind == "CANCELED":
        exc = errors.CancelledError(message, *decode_details(record.get("details")), failure=record)
    elif kind == "TERMINATED":
        exc = errors.TerminatedError(message, failure=record)
    elif kind == "SERVER":
        exc = errors.ServerError(message, non_retryable=bool(record.get("non_retryable")),
                                 failure=record)
    else:
        exc = errors.FailureError(message, failure=record)
    exc.__cause__ = exception_from_failure(record.get("cause"), depth + 1, converter=converter)
    return exc


def _details(details: tuple[Any, ...] | Any, converter: DataConverter) -> str | None:
    return converter.encode_details(list(details)) if details else None


def _stack_trace(exc: BaseException) -> str:
    if exc.__traceback__ is None:
        return ""
    return "".join(traceback.format_tb(exc.__traceback__))[-_MAX_STACK_TRACE:]
