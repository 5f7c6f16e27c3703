"""Workflows, as in Temporal's Python SDK::

    from datetime import timedelta
    from streamproc import workflow

    @workflow.defn
    class OrderWorkflow:
        @workflow.run
        async def run(self, order_id: str) -> str:
            await workflow.execute_activity("reserve", order_id,
                                            start_to_close_timeout=timedelta(seconds=10))
            await workflow.sleep(timedelta(hours=24))
            return await workflow.execute_activity("charge", order_id,
                                                   start_to_close_timeout=timedelta(seconds=10))

`execute_local_activity(fn, ...)` runs a function in the workflow worker itself, inside
the workflow task, with its outcome recorded as a marker (Temporal's local activities).

Workflow code runs on a deterministic event loop and is replayed from the run's history
on every workflow task (or resumed from a worker's cache), so it must get time,
randomness and ids from this module, and do I/O only in activities. Raising
`ApplicationError` (any `FailureError`) fails the run; any other exception fails only
the workflow task, which is retried, like Temporal. The runtime a worker drives is
`streamproc.workflow.instance.WorkflowInstance`.
"""

from streamproc.exceptions import ChildWorkflowError
from streamproc.activity.errors import (
    ActivityError,
    ApplicationError,
    CancelledError,
    FailureError,
    TimeoutError,
)
from streamproc.semantics import RetryPolicy, RetryState, TimeoutType
from streamproc.workflow.activities import (
    ActivityCancellationType,
    ActivityHandle,
    execute_activity,
    start_activity,
)
from streamproc.workflow.children import (
    ChildWorkflowHandle,
    ExternalWorkflowHandle,
    ParentClosePolicy,
    execute_child_workflow,
    get_external_workflow_handle,
    start_child_workflow,
)
from streamproc.workflow.context import (
    all_handlers_finished,
    continue_as_new,
    deprecate_patch,
    info,
    is_replaying,
    now,
    patched,
    random,
    set_dynamic_query_handler,
    set_dynamic_signal_handler,
    set_query_handler,
    set_signal_handler,
    uuid4,
)
from streamproc.workflow.definition import WorkflowDefinition, defn, query, run, signal, update
from streamproc.workflow.errors import (
    ContinueAsNewError,
    NondeterministicCallError,
    NonDeterminismError,
    NotInWorkflowError,
    ReadOnlyContextError,
)
from streamproc.workflow.local_activities import (
    LocalActivityHandle,
    execute_local_activity,
    start_local_activity,
)
from streamproc.workflow.last_run import get_last_completion_result, get_last_failure, has_last_completion_result
from streamproc.workflow.run_info import Info
from streamproc.workflow.timers import sleep, wait_condition

__all__ = [
    "defn",
    "run",
    "signal",
    "query",
    "update",
    "set_signal_handler",
    "set_dynamic_signal_handler",
    "set_query_handler",
    "set_dynamic_query_handler",
    "all_handlers_finished",
    "WorkflowDefinition",
    "execute_activity",
    "start_activity",
    "ActivityHandle",
    "ActivityCancellationType",
    "execute_local_activity",
    "start_local_activity",
    "LocalActivityHandle",
    "start_child_workflow",
    "execute_child_workflow",
    "get_external_workflow_handle",
    "ChildWorkflowHandle",
    "ExternalWorkflowHandle",
    "ParentClosePolicy",
    "ChildWorkflowError",
    "sleep",
    "wait_condition",
    "now",
    "random",
    "uuid4",
    "info",
    "has_last_completion_result",
    "get_last_completion_result",
    "get_last_failure",
    "Info",
    "is_replaying",
    "patched",
    "deprecate_patch",
    "continue_as_new",
    "RetryPolicy",
    "RetryState",
    "TimeoutType",
    "FailureError",
    "ApplicationError",
    "ActivityError",
    "CancelledError",
    "TimeoutError",
    "ContinueAsNewError",
    "NonDeterminismError",
    "NondeterministicCallError",
    "NotInWorkflowError",
    "ReadOnlyContextError",
]
