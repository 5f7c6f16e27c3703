"""What a worker reports for an exception, and what a caller raises for a close event."""

from __future__ import annotations

from datetime import timedelta

import pytest

from streamproc.activity import (
    ActivityError,
    ApplicationError,
    CancelledError,
    RetryState,
    TimeoutError,
    TimeoutType,
)
from streamproc.activity.failures import exception_from_failure, failure_from_exception
from streamproc.client.activities import outcome
from streamproc.protocol.records import Record, RecordType


def raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:
        return caught


def test_an_application_error_keeps_its_type_details_and_retry_hints():
    record = failure_from_exception(raised(ApplicationError(
        "card declined", {"code": 51}, "again", type="Declined", non_retryable=True,
        next_retry_delay=timedelta(microseconds=1500))))
    assert record["kind"] == "APPLICATION" and record["type"] == "Declined"
    assert record["message"] == "card declined" and record["non_retryable"] is True
    assert record["details"] == '[{"code":51},"again"]'
    assert record["next_retry_delay_ms"] == 2  # rounded up: 1.5 ms is not "at once"
    assert "raised" in record["stack_trace"]


def test_any_other_exception_fails_with_its_class_name_and_its_cause_chain():
    try:
        try:
            {}["sku"]
        except KeyError as inner:
            raise ValueError("no such product") from inner
    except ValueError as exc:
        record = failure_from_exception(exc)
    assert (record["kind"], record["type"], record["message"]) == ("APPLICATION", "ValueError", "no such product")
    assert (record["cause"]["type"], record["cause"]["message"]) == ("KeyError", "'sku'")
    assert record["next_retry_delay_ms"] == -1 and record["details"] is None
    # an ApplicationError without a type is named after its class, subclasses included
    class PaymentError(ApplicationError):
        pass
    assert failure_from_exception(PaymentError("x"))["type"] == "PaymentError"


def test_a_cancelled_error_is_a_canceled_failure():
    record = failure_from_exception(CancelledError("stopped", "at page 3"))
    assert (record["kind"], record["type"], record["details"]) == ("CANCELED", "", '["at page 3"]')


def test_records_become_the_matching_exceptions_with_causes():
    timeout = {"message": "activity Heartbeat timeout", "kind": "TIMEOUT", "timeout_type": "HEARTBEAT",
               "details": "[4]", "cause": {"message": "boom", "kind": "APPLICATION", "type": "Boom",
                                           "details": None, "next_retry_delay_ms": 1000}}
    exc = exception_from_failure(timeout)
    assert isinstance(exc, TimeoutError) and exc.type is TimeoutType.HEARTBEAT
    assert exc.last_heartbeat_details == (4,) and exc.failure is timeout
    assert isinstance(exc.cause, ApplicationError) and exc.cause.type == "Boom"
    assert exc.cause.next_retry_delay == timedelta(seconds=1) and exc.cause.cause is None
    round_trip = exception_from_failure(failure_from_exception(ApplicationError("m", 1, type="T")))
    assert (round_trip.message, round_trip.details, round_trip.type) == ("m", (1,), "T")
    assert exception_from_failure(None) is None


def close_event(intent: str, **value) -> Record:
    base = {"activity_id": "a-1", "activity_type": "charge", "scheduled_event_id": 1, "started_event_id": 2,
            "identity": "w1", "retry_state": "", "result": None, "failure": None, "details": None}
    return Record(RecordType.EVENT, "ACTIVITY_TASK", intent, {**base, **value}, key=7)


def test_close_events_become_a_result_or_an_activity_error():
    assert outcome(close_event("ActivityTaskCompleted", result='{"ok": true}')) == {"ok": True}

    failure = {"message": "declined", "kind": "APPLICATION", "type": "Declined", "non_retryable": True}
    with pytest.raises(ActivityError) as caught:
        outcome(close_event("ActivityTaskFailed", failure=failure, retry_state="NON_RETRYABLE_FAILURE"))
    error = caught.value
    assert error.message == "Activity task failed" and error.retry_state is RetryState.NON_RETRYABLE_FAILURE
    assert (error.activity_id, error.identity, error.started_event_id) == ("a-1", "w1", 2)
    assert isinstance(error.cause, ApplicationError) and error.cause.non_retryable

    timed_out = {"message": "activity StartToClose timeout", "kind": "TIMEOUT", "timeout_type": "START_TO_CLOSE"}
    with pytest.raises(ActivityError, match="Activity task timed out") as caught:
        outcome(close_event("ActivityTaskTimedOut", failure=timed_out, retry_state="MAXIMUM_ATTEMPTS_REACHED"))
    assert caught.value.cause.type is TimeoutType.START_TO_CLOSE

    with pytest.raises(ActivityError, match="Activity task canceled") as caught:
        outcome(close_event("ActivityTaskCanceled", details='"ACTIVITY_ID_NOT_STARTED"'))
    assert caught.value.retry_state is RetryState.CANCEL_REQUESTED
    assert isinstance(caught.value.cause, CancelledError)
    assert caught.value.cause.details == ("ACTIVITY_ID_NOT_STARTED",)
