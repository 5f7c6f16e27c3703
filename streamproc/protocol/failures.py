"""FailureRecord dicts (what travels and is stored) to and from the semantics' Failure objects."""

from __future__ import annotations

from typing import Any

import orjson

from streamproc.semantics.enums import TimeoutType
from streamproc.semantics.failures import (
    ApplicationFailure,
    CanceledFailure,
    Failure,
    ServerFailure,
    TerminatedFailure,
    TimeoutFailure,
)
from streamproc.protocol.wire_values import duration_from_ms

_MAX_DEPTH = 20  # causes nest; a cycle or an absurd chain must not blow the stack


def failure_to_record(failure: Failure | None, depth: int = 0) -> dict[str, Any] | None:
    if failure is None or depth > _MAX_DEPTH:
        return None
    record: dict[str, Any] = {
        "message": failure.message, "kind": "GENERIC", "type": "", "non_retryable": False,
        "next_retry_delay_ms": -1, "timeout_type": "", "details": None, "stack_trace": "",
        "cause": failure_to_record(failure.cause, depth + 1),
    }
    if isinstance(failure, ApplicationFailure):
        record.update(kind="APPLICATION", type=failure.type, non_retryable=failure.non_retryable)
        if failure.next_retry_delay is not None:
            record["next_retry_delay_ms"] = int(failure.next_retry_delay.total_seconds() * 1000)
    elif isinstance(failure, TimeoutFailure):
        record.update(kind="TIMEOUT", timeout_type=failure.timeout_type.name,
                      details=_json(failure.last_heartbeat_details))
    elif isinstance(failure, ServerFailure):
        record.update(kind="SERVER", non_retryable=failure.non_retryable)
    elif isinstance(failure, CanceledFailure):
        record["kind"] = "CANCELED"
    elif isinstance(failure, TerminatedFailure):
        record["kind"] = "TERMINATED"
    return record


def failure_from_record(record: dict[str, Any] | None, depth: int = 0) -> Failure | None:
    if record is None or depth > _MAX_DEPTH:
        return None
    message = record.get("message", "")
    cause = failure_from_record(record.get("cause"), depth + 1)
    kind = record.get("kind", "APPLICATION")
    if kind == "APPLICATION":
        delay_ms = record.get("next_retry_delay_ms", -1)
        return ApplicationFailure(
            message=message, cause=cause, type=record.get("type", ""),
            non_retryable=bool(record.get("non_retryable", False)),
            next_retry_delay=duration_from_ms(delay_ms) if delay_ms >= 0 else None)
    if kind == "TIMEOUT":
        details = record.get("details")
        return TimeoutFailure(message=message, cause=cause,
                              timeout_type=TimeoutType[record.get("timeout_type") or "UNSPECIFIED"],
                              last_heartbeat_details=orjson.loads(details) if details else None)
    if kind == "SERVER":
        return ServerFailure(message=message, cause=cause, non_retryable=bool(record.get("non_retryable")))
    if kind == "CANCELED":
        return CanceledFailure(message=message, cause=cause)
    if kind == "TERMINATED":
        return TerminatedFailure(message=message, cause=cause)
    return Failure(message=message, cause=cause)


def check_failure_record(record: Any) -> str | None:
    """Why a failure sent by a worker is unacceptable, or None."""
    if not isinstance(record, dict):
        return "failure must be a FailureRecord"
    kind = record.get("kind", "APPLICATION")
    if kind not in ("APPLICATION", "GENERIC", "CANCELED", "SERVER"):
        return f"a worker may report APPLICATION, GENERIC, CANCELED or SERVER failures, got {kind!r}"
    return None


def _json(value: Any) -> str | None:
    return None if value is None else orjson.dumps(value).decode()
