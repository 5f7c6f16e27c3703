"""The workflow client without a broker: arguments refused before sending, and what a
run's close event means to a caller waiting for its result."""

from __future__ import annotations

from datetime import timedelta

import pytest

from streamproc.activity.failures import failure_from_exception
from streamproc.client import SyncClient, WorkflowExecutionDescription, WorkflowFailureError
from streamproc.client.errors import (
    ApplicationError,
    CancelledError,
    InvalidArgument,
    TerminatedError,
    TimeoutError,
    WorkflowContinuedAsNewError,
)
from streamproc.client.workflow_events import WorkflowEvent
from streamproc.client.workflow_handle import outcome_of_close
from streamproc.semantics import TimeoutType
from streamproc.semantics.workflow_ids import WorkflowExecutionStatus, WorkflowIdConflictPolicy, WorkflowIdReusePolicy


@pytest.fixture
def client():
    # No broker is contacted: every case is refused before anything is sent.
    c = SyncClient("127.0.0.1:1", "unit", log_level=0)
    yield c
    c._producer.purge()
    c._loop.close()


@pytest.mark.parametrize("options, message", [
    ({"run_timeout": timedelta(seconds=-1)},
     "An invalid WorkflowRunTimeoutSeconds is set on request. cause: negative duration"),
    ({"execution_timeout": timedelta(seconds=-1)},
     "An invalid WorkflowExecutionTimeoutSeconds is set on request. cause: negative duration"),
    ({"id": ""}, "WorkflowId is not set on request."),
    ({"id": "x" * 1001}, "WorkflowId exceeds maximum allowed length (1001/1000)"),
    ({"task_queue": "no spaces"}, "task queue must be 1-200 characters"),
    ({"id_reuse_policy": WorkflowIdReusePolicy.REJECT_DUPLICATE,
      "id_conflict_policy": WorkflowIdConflictPolicy.TERMINATE_EXISTING},
     "Invalid WorkflowIDReusePolicy: WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE cannot be used together "
     "with WorkflowIdConflictPolicy WORKFLOW_ID_CONFLICT_POLICY_TERMINATE_EXISTING"),
])
def test_bad_start_arguments_raise_the_engines_message_before_sending(client, options, message):
    options = {"id": "wf", "task_queue": "q", **options}
    with pytest.raises(InvalidArgument) as raised:
        client.start_workflow("Order", 1, **options)
    assert str(raised.value).startswith(message)
    assert client._workflow_requests is None  # no replies listener was even started


def test_arg_and_args_together_are_refused(client):
    with pytest.raises(ValueError, match="either arg or args"):
        client.start_workflow("Order", 1, args=[2], id="wf", task_queue="q")


def test_a_timeout_must_be_a_timedelta(client):
    with pytest.raises(TypeError, match="run_timeout must be a timedelta"):
        client.start_workflow("Order", id="wf", task_queue="q", run_timeout=5)


def close(event_type: str, **attributes) -> WorkflowEvent:
    return WorkflowEvent("wf", "run-1", 9, event_type, 0, attributes)


def test_a_completed_run_gives_its_result():
    assert outcome_of_close(close("WORKFLOW_EXECUTION_COMPLETED", result='{"total": 5}')) == {"total": 5}
    assert outcome_of_close(close("WORKFLOW_EXECUTION_COMPLETED", result=None)) is None


def test_a_failed_run_raises_workflow_failure_error_caused_by_the_workflows_error():
    error = ApplicationError("out of stock", {"sku": 1}, type="OutOfStock", non_retryable=True)
    error.__cause__ = ValueError("inner")
    with pytest.raises(WorkflowFailureError) as raised:
        outcome_of_close(close("WORKFLOW_EXECUTION_FAILED", failure=failure_from_exception(error)))
    assert str(raised.value) == "Workflow execution failed" and raised.value.run_id == "run-1"
    cause = raised.value.cause
    assert isinstance(cause, ApplicationError) and cause.message == "out of stock"
    assert cause.type == "OutOfStock" and cause.non_retryable and list(cause.details) == [{"sku": 1}]
    assert isinstance(cause.cause, ApplicationError) and cause.cause.type == "ValueError"


@pytest.mark.parametrize("event_type, attributes, cause_type, message", [
    ("WORKFLOW_EXECUTION_CANCELED", {"details": '["bye"]'}, CancelledError, "Workflow cancelled"),
    ("WORKFLOW_EXECUTION_TERMINATED", {"reason": "by hand"}, TerminatedError, "by hand"),
    ("WORKFLOW_EXECUTION_TERMINATED", {"reason": ""}, TerminatedError, "Workflow terminated"),
    ("WORKFLOW_EXECUTION_TIMED_OUT", {"retry_state": "TIMEOUT"}, TimeoutError, "Workflow timed out"),
])
def test_other_ends_are_the_cause_of_workflow_failure_error(event_type, attributes, cause_type, message):
    with pytest.raises(WorkflowFailureError) as raised:
        outcome_of_close(close(event_type, **attributes))
    cause = raised.value.cause
    assert type(cause) is cause_type and cause.message == message
    if cause_type is CancelledError:
        assert list(cause.details) == ["bye"]
    if cause_type is TimeoutError:
        assert cause.type is TimeoutType.START_TO_CLOSE


def test_continued_as_new_is_an_error_only_when_runs_are_not_followed():
    with pytest.raises(WorkflowContinuedAsNewError) as raised:
        outcome_of_close(close("WORKFLOW_EXECUTION_CONTINUED_AS_NEW", new_execution_run_id="run-2"))
    assert raised.value.new_execution_run_id == "run-2"


@pytest.mark.parametrize("status", ["RUNNING", "WORKFLOW_EXECUTION_STATUS_RUNNING", 1])
def test_a_description_reads_the_status_by_name_or_number(status):
    description = WorkflowExecutionDescription({"status": status, "workflow_type": "Order"})
    assert description.status is WorkflowExecutionStatus.RUNNING and description.workflow_type == "Order"
    with pytest.raises(AttributeError):
        description.no_such_field
