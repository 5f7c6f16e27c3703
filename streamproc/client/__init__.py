"""The Python client: `Client` (asyncio, as Temporal's), `SyncClient` (the blocking convenience
over it), activity and schedule handles, event readers."""

from streamproc.client.activities import ActivityClient, ActivityHandle
from streamproc.client.async_activities import AsyncActivityHandle, AsyncActivityIDReference
from streamproc.client.client import Client, SyncClient
from streamproc.client.errors import (
    CommandsNotDeliveredError,
    RequestNotSentError,
    RequestOutcomeUnknownError,
    WorkflowAlreadyStartedError,
    WorkflowContinuedAsNewError,
    WorkflowFailureError,
    WorkflowNotFoundError,
    WorkflowNotStartedError,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
    WorkflowUpdateFailedError,
    WorkflowStartOutcomeUnknownError,
)
from streamproc.client.workflow_updates import WorkflowUpdateHandle, WorkflowUpdateStage
from streamproc.semantics.workflow_ids import QueryRejectCondition
from streamproc.client.events import EventReader
from streamproc.client.schedule_types import (
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleBackfill,
    ScheduleCalendarSpec,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleRange,
    ScheduleSpec,
    ScheduleState,
)
from streamproc.client.schedules import (
    ScheduleActionResult,
    ScheduleDescription,
    ScheduleHandle,
    ScheduleInfo,
    ScheduleListDescription,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from streamproc.exceptions import (
    ActivityNotFoundError,
    AsyncActivityCancelledError,
    ScheduleAlreadyRunningError,
    WorkflowUpdateNotFoundError,
)
from streamproc.client.workflow_handle import WorkflowExecutionDescription, WorkflowHandle, WorkflowHistory
from streamproc.client.workflow_listing import ExecutionSummary, WorkflowExecutionCount

__all__ = ["Client", "SyncClient", "EventReader", "ActivityClient", "ActivityHandle", "WorkflowHandle",
           "AsyncActivityHandle", "AsyncActivityIDReference", "AsyncActivityCancelledError", "ActivityNotFoundError",
           "WorkflowHistory", "WorkflowExecutionDescription", "WorkflowAlreadyStartedError",
           "WorkflowFailureError", "WorkflowContinuedAsNewError", "WorkflowNotFoundError",
           "WorkflowStartOutcomeUnknownError", "WorkflowNotStartedError", "RequestOutcomeUnknownError",
           "RequestNotSentError", "CommandsNotDeliveredError",
           "WorkflowQueryFailedError", "WorkflowQueryRejectedError", "QueryRejectCondition",
           "WorkflowUpdateFailedError", "WorkflowUpdateHandle", "WorkflowUpdateStage", "WorkflowUpdateNotFoundError",
           "Schedule", "ScheduleActionStartWorkflow", "ScheduleBackfill", "ScheduleCalendarSpec",
           "ScheduleIntervalSpec", "ScheduleOverlapPolicy", "SchedulePolicy", "ScheduleRange", "ScheduleSpec",
           "ScheduleState", "ScheduleActionResult", "ScheduleDescription", "ScheduleHandle", "ScheduleInfo",
           "ScheduleListDescription", "ScheduleUpdate", "ScheduleUpdateInput", "ScheduleAlreadyRunningError", "ExecutionSummary", "WorkflowExecutionCount"]
