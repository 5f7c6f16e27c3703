"""Pure Temporal semantics: retry policies and activity timeouts.

No I/O and no clock reads: every function takes the time it needs as an argument.
Durations are ``datetime.timedelta``; a raw number says its unit in its name (``_ns``).
See ``SEMANTICS.md`` sections 1, 2 and 9 for the behaviour these functions reproduce.
"""

from streamproc.semantics.activity_attempts import (
    ActivityCompleted,
    ActivityFailed,
    ActivityOutcome,
    ActivityRetry,
    ActivityState,
    ActivityTimedOut,
    complete_attempt,
    fail_attempt,
    fire_activity_timeout,
    next_activity_deadline,
    record_heartbeat,
    schedule_activity,
    start_attempt,
)
from streamproc.semantics.activity_timeline import (
    ActivityTimeline,
    AttemptPlan,
    AttemptRecord,
    run_activity_timeline,
)
from streamproc.semantics.activity_timeouts import (
    NOT_ENOUGH_TIME_MESSAGE,
    ActivityDeadline,
    ActivityTimeouts,
    activity_deadlines,
    activity_timeout_failure,
    heartbeat_deadline,
    normalize_activity_timeouts,
    retry_expiration,
    timed_out_event_failure,
)
from streamproc.semantics.backoff import (
    RetryDecision,
    exponential_backoff_ns,
    next_backoff_interval,
)
from streamproc.semantics.durations import MAX_DURATION
from streamproc.semantics.enums import RetryState, TimeoutType
from streamproc.semantics.errors import InvalidArgument
from streamproc.semantics.failures import (
    ActivityFailure,
    ApplicationFailure,
    CanceledFailure,
    ChildWorkflowFailure,
    Failure,
    ServerFailure,
    TerminatedFailure,
    TimeoutFailure,
)
from streamproc.semantics.retry import (
    DEFAULT_RETRY_SETTINGS,
    TIMEOUT_FAILURE_TYPE_PREFIX,
    RetryPolicy,
    RetrySettings,
    activity_retry_decision,
    ensure_retry_defaults,
    is_retryable_failure,
    next_retry_delay,
    normalize_activity_retry_policy,
    normalize_workflow_retry_policy,
    validate_retry_policy,
    workflow_retry_decision,
)
from streamproc.semantics.swf import (
    SWF_ACTIVITY_RETRY_POLICY,
    SWF_MAXIMUM_DURATION,
    SWF_NONE,
    format_swf_timeout,
    parse_swf_timeout,
    swf_activity_timeouts,
    swf_timeout_to_temporal,
    swf_workflow_run_timeout,
    timeout_type_from_swf,
    timeout_type_to_swf,
)
from streamproc.semantics.workflow_retry import (
    WORKFLOW_ID_REUSE_MINIMAL_INTERVAL,
    WorkflowRetryPlan,
    first_workflow_task_backoff,
    plan_workflow_retry,
    workflow_execution_expiration,
)

__all__ = [
    # errors and enums
    "InvalidArgument",
    "RetryState",
    "TimeoutType",
    "MAX_DURATION",
    # failures
    "Failure",
    "ApplicationFailure",
    "TimeoutFailure",
    "ServerFailure",
    "CanceledFailure",
    "TerminatedFailure",
    "ActivityFailure",
    "ChildWorkflowFailure",
    # retry policy
    "TIMEOUT_FAILURE_TYPE_PREFIX",
    "RetrySettings",
    "DEFAULT_RETRY_SETTINGS",
    "RetryPolicy",
    "RetryDecision",
    "ensure_retry_defaults",
    "validate_retry_policy",
    "normalize_activity_retry_policy",
    "normalize_workflow_retry_policy",
    "is_retryable_failure",
    "next_retry_delay",
    "exponential_backoff_ns",
    "next_backoff_interval",
    "activity_retry_decision",
    "workflow_retry_decision",
    # workflow retry
    "WORKFLOW_ID_REUSE_MINIMAL_INTERVAL",
    "WorkflowRetryPlan",
    "workflow_execution_expiration",
    "first_workflow_task_backoff",
    "plan_workflow_retry",
    # activity timeouts
    "NOT_ENOUGH_TIME_MESSAGE",
    "ActivityTimeouts",
    "ActivityDeadline",
    "normalize_activity_timeouts",
    "retry_expiration",
    "heartbeat_deadline",
    "activity_deadlines",
    "activity_timeout_failure",
    "timed_out_event_failure",
    # activity attempts
    "ActivityState",
    "ActivityRetry",
    "ActivityCompleted",
    "ActivityFailed",
    "ActivityTimedOut",
    "ActivityOutcome",
    "schedule_activity",
    "start_attempt",
    "record_heartbeat",
    "next_activity_deadline",
    "fire_activity_timeout",
    "fail_attempt",
    "complete_attempt",
    "AttemptPlan",
    "AttemptRecord",
    "ActivityTimeline",
    "run_activity_timeline",
    # SWF
    "SWF_NONE",
    "SWF_MAXIMUM_DURATION",
    "SWF_ACTIVITY_RETRY_POLICY",
    "parse_swf_timeout",
    "format_swf_timeout",
    "swf_timeout_to_temporal",
    "swf_activity_timeouts",
    "swf_workflow_run_timeout",
    "timeout_type_from_swf",
    "timeout_type_to_swf",
]
