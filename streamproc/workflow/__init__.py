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
    execute_activity_method,
    start_activity,
    start_activity_method,
)
from streamproc.workflow.children import (
    ChildWorkflowHandle,
    ExternalWorkflowHandle,
    ParentClosePolicy,
    execute_child_workflow,
    get_external_workflow_handle,
    get_external_workflow_handle_for,
    start_child_workflow,
)
from streamproc.workflow.context import (
    all_handlers_finished,
    continue_as_new,
    deprecate_patch,
    in_workflow,
    info,
    is_replaying,
    now,
    patched,
    random,
    set_dynamic_query_handler,
    set_dynamic_signal_handler,
    set_query_handler,
    set_signal_handler,
    time,
    time_ns,
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
from streamproc.workflow.last_run import get_last_completion_result, get_last_failure, has_last_completion_result
from streamproc.workflow.logger import LoggerAdapter, logger

#: Temporal's spelling of the same class.
NondeterminismError = NonDeterminismError
from streamproc.workflow.run_info import Info, ParentInfo
from streamproc.workflow.timers import sleep, wait_condition
from streamproc.workflow import unsafe
from streamproc.unsupported import unsupported_names

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
    "execute_activity_method",
    "start_activity_method",
    "ActivityHandle",
    "ActivityCancellationType",
    "start_child_workflow",
    "execute_child_workflow",
    "get_external_workflow_handle",
    "get_external_workflow_handle_for",
    "ChildWorkflowHandle",
    "ExternalWorkflowHandle",
    "ParentClosePolicy",
    "ChildWorkflowError",
    "sleep",
    "wait_condition",
    "now",
    "time",
    "time_ns",
    "in_workflow",
    "logger",
    "LoggerAdapter",
    "unsafe",
    "ParentInfo",
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
    "NondeterminismError",
    "NondeterministicCallError",
    "NotInWorkflowError",
    "ReadOnlyContextError",
]

_LOCAL_ACTIVITIES = "local activities (use execute_activity: every activity goes through the engine)"
_SEARCH_ATTRIBUTES = "search attributes"
_NEXUS = "Nexus operations"
__getattr__ = unsupported_names(__name__, {
    "execute_local_activity": _LOCAL_ACTIVITIES,
    "start_local_activity": _LOCAL_ACTIVITIES,
    "execute_local_activity_method": _LOCAL_ACTIVITIES,
    "start_local_activity_method": _LOCAL_ACTIVITIES,
    "execute_local_activity_class": _LOCAL_ACTIVITIES,
    "start_local_activity_class": _LOCAL_ACTIVITIES,
    "LocalActivityConfig": _LOCAL_ACTIVITIES,
    "execute_activity_class": "activities that are callable class instances",
    "start_activity_class": "activities that are callable class instances",
    "upsert_search_attributes": _SEARCH_ATTRIBUTES,
    "search_attributes": _SEARCH_ATTRIBUTES,
    "memo": "workflow memos", "memo_value": "workflow memos", "upsert_memo": "workflow memos",
    "as_completed": "deterministic as_completed (use asyncio.gather)",
    "wait": "deterministic wait (use asyncio.gather or workflow.wait_condition)",
    "init": "@workflow.init (workflow classes are created with no arguments)",
    "instance": "workflow.instance()",
    "set_update_handler": "update handlers set at run time (declare them with @workflow.update)",
    "set_dynamic_update_handler": "update handlers set at run time (use @workflow.update(dynamic=True))",
    "get_signal_handler": "handler lookups", "get_query_handler": "handler lookups",
    "get_update_handler": "handler lookups", "get_dynamic_signal_handler": "handler lookups",
    "get_dynamic_query_handler": "handler lookups", "get_dynamic_update_handler": "handler lookups",
    "current_update_info": "update info", "UpdateInfo": "update info",
    "payload_converter": "workflow.payload_converter() (the worker's DataConverter decodes by type hints)",
    "metric_meter": "SDK metric meters",
    "extern_functions": "extern functions",
    "get_current_details": "workflow details", "set_current_details": "workflow details",
    "new_random": "workflow.new_random (use workflow.random())",
    "random_seed": "random seeds", "register_random_seed_callback": "random seeds",
    "uuid7": "workflow.uuid7 (use workflow.uuid4())",
    "cancellation_reason": "cancellation reasons",
    "ChildWorkflowCancellationType": "child workflow cancellation types",
    "HandlerUnfinishedPolicy": "unfinished handler policies",
    "VersioningIntent": "worker versioning", "ContinueAsNewVersioningBehavior": "worker versioning",
    "DynamicWorkflowConfig": "dynamic workflows", "dynamic_config": "dynamic workflows",
    "RootInfo": "root workflow info",
    "NexusClient": _NEXUS, "create_nexus_client": _NEXUS, "NexusOperationHandle": _NEXUS,
    "NexusOperationCancellationType": _NEXUS,
})
