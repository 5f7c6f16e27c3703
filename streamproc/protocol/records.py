"""The record envelope shared by commands, events and rejections, and the vocabulary of intents.

Names follow Zeebe for jobs (CREATE, TIME_OUT, RECUR_AFTER_BACKOFF, ...): a command is
imperative, the event that answers it is in the past tense.
"""

from __future__ import annotations

import dataclasses
from enum import StrEnum
from typing import Any


class RecordType(StrEnum):
    COMMAND = "COMMAND"
    EVENT = "EVENT"
    COMMAND_REJECTION = "COMMAND_REJECTION"


# Python 3.11's EnumType reads every class attribute through its __getattr__ hook (about
# a microsecond each, gone in 3.12): the per-record paths use these plain names.
COMMAND, EVENT = RecordType.COMMAND, RecordType.EVENT


class ValueType(StrEnum):
    JOB = "JOB"
    INCIDENT = "INCIDENT"
    ACTIVITY_TASK = "ACTIVITY_TASK"
    WORKFLOW = "WORKFLOW"
    SCHEDULE = "SCHEDULE"
    #: A worker's registration for pushed jobs of one queue on one partition.
    JOB_STREAM = "JOB_STREAM"
    #: Only on rejections of commands that could not be decoded.
    UNKNOWN = "UNKNOWN"


class JobIntent(StrEnum):
    # commands
    CREATE = "CREATE"
    START = "START"
    COMPLETE = "COMPLETE"
    FAIL = "FAIL"
    TIME_OUT = "TIME_OUT"
    RECUR_AFTER_BACKOFF = "RECUR_AFTER_BACKOFF"
    UPDATE_RETRIES = "UPDATE_RETRIES"
    CANCEL = "CANCEL"
    # events
    CREATED = "CREATED"
    STARTED = "STARTED"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    TIMED_OUT = "TIMED_OUT"
    RECURRED_AFTER_BACKOFF = "RECURRED_AFTER_BACKOFF"
    RETRIES_UPDATED = "RETRIES_UPDATED"
    CANCELED = "CANCELED"
    #: Not an event: the record a worker receives on tasks.<type> when the job is startable.
    ACTIVATABLE = "ACTIVATABLE"


class ActivityIntent(StrEnum):
    """Activity commands, and events named as Temporal's history events."""

    # commands
    SCHEDULE = "SCHEDULE"
    START = "START"
    HEARTBEAT = "HEARTBEAT"
    COMPLETE = "COMPLETE"
    FAIL = "FAIL"
    REQUEST_CANCEL = "REQUEST_CANCEL"
    REPORT_CANCELED = "REPORT_CANCELED"
    #: From the due-date checker: a timeout timer fired.
    TIME_OUT = "TIME_OUT"
    #: From the due-date checker: a retry's backoff is over, publish the attempt.
    DISPATCH = "DISPATCH"
    # history events
    SCHEDULED = "ActivityTaskScheduled"
    STARTED = "ActivityTaskStarted"
    COMPLETED = "ActivityTaskCompleted"
    FAILED = "ActivityTaskFailed"
    TIMED_OUT = "ActivityTaskTimedOut"
    CANCEL_REQUESTED = "ActivityTaskCancelRequested"
    CANCELED = "ActivityTaskCanceled"
    # answers on the replies topic only (Temporal writes no history for these)
    ATTEMPT_STARTED = "ATTEMPT_STARTED"
    HEARTBEAT_RECORDED = "HEARTBEAT_RECORDED"
    #: A COMPLETE, FAIL or REPORT_CANCELED that asked for it (`reply_when_accepted`) was applied.
    ANSWER_ACCEPTED = "ANSWER_ACCEPTED"
    #: Not an event: the record a worker receives on tasks.<queue> for an attempt.
    ACTIVITY_TASK = "ACTIVITY_TASK"


class WorkflowIntent(StrEnum):
    """Workflow commands and replies (docs/workflow-protocol.md).

    History events about a workflow are records whose intent is the `EventType` member
    name (``WORKFLOW_EXECUTION_STARTED``, ``TIMER_FIRED``, ...), not one of these.
    """

    # commands from clients
    START = "START"
    REQUEST_CANCEL = "REQUEST_CANCEL"
    TERMINATE = "TERMINATE"
    DESCRIBE = "DESCRIBE"
    GET_HISTORY = "GET_HISTORY"
    SIGNAL = "SIGNAL"
    #: Answered by a workflow worker, not the engine: the engine checks the run and hands
    #: the query to its task queue as a QUERY_TASK; the worker replies QUERY_ANSWERED.
    QUERY = "QUERY"
    #: A change the workflow validates and applies (Temporal's update); answered with
    #: UPDATE_ACCEPTED, UPDATE_COMPLETED or UPDATE_REJECTED at the stage asked for.
    UPDATE = "UPDATE"
    #: Wait for the outcome of an update sent before, by anyone (Temporal's
    #: PollWorkflowExecutionUpdate): answered like the UPDATE at the stage asked for;
    #: NOT_FOUND for an update id the run does not know.
    POLL_UPDATE = "POLL_UPDATE"
    #: Wait for a run's close: registered on the open run (the close is sent to the
    #: command's `close_reply` when it comes), or answered at once if it is closed.
    #: Acknowledged with RESULT_WAIT_ACCEPTED.
    WAIT_RESULT = "WAIT_RESULT"
    # commands between partitions, for workflows that talk to each other: written by the
    # engine in the transaction that decided them, so each is sent exactly once
    #: To the parent's partition: its child started (attributes: initiated event, child run).
    CHILD_STARTED = "CHILD_STARTED"
    #: To the parent's partition: its child could not start (attributes: cause).
    CHILD_START_FAILED = "CHILD_START_FAILED"
    #: To the parent's partition: its child's chain of runs ended (attributes: the close event).
    CHILD_CLOSED = "CHILD_CLOSED"
    #: To the sender's partition: its signal / cancel request reached the target, or not.
    EXTERNAL_SIGNALED = "EXTERNAL_SIGNALED"
    EXTERNAL_SIGNAL_FAILED = "EXTERNAL_SIGNAL_FAILED"
    EXTERNAL_CANCEL_REQUESTED = "EXTERNAL_CANCEL_REQUESTED"
    EXTERNAL_CANCEL_FAILED = "EXTERNAL_CANCEL_FAILED"
    # commands from workflow workers
    TASK_COMPLETE = "TASK_COMPLETE"
    TASK_FAIL = "TASK_FAIL"
    #: Local activity markers of the task out, kept until it completes (a checkpointing
    #: worker's step on the log before the next runs; engine/workflows/journaled_markers.py).
    JOURNAL_MARKERS = "JOURNAL_MARKERS"
    # commands from the due-date checker (re-checked against state; stale -> rejection)
    TASK_TIME_OUT = "TASK_TIME_OUT"
    TIMER_FIRE = "TIMER_FIRE"
    RUN_TIME_OUT = "RUN_TIME_OUT"
    EXECUTION_TIME_OUT = "EXECUTION_TIME_OUT"
    BACKOFF_START = "BACKOFF_START"
    # answers on the replies topic
    STARTED = "STARTED"
    DESCRIBED = "DESCRIBED"
    HISTORY_PAGE = "HISTORY_PAGE"
    #: A SIGNAL's answer: recorded (now, or before under the same request id).
    SIGNALED = "SIGNALED"
    #: A QUERY's answer from the worker (`result`, or `failure` when its handler failed).
    QUERY_ANSWERED = "QUERY_ANSWERED"
    #: A QUERY refused by its reject condition (`attributes`: the run's status).
    QUERY_REJECTED = "QUERY_REJECTED"
    #: Answers to an UPDATE: accepted by its validator; done (`result` or `failure`);
    #: refused by its validator or never handled (`failure`).
    UPDATE_ACCEPTED = "UPDATE_ACCEPTED"
    UPDATE_COMPLETED = "UPDATE_COMPLETED"
    UPDATE_REJECTED = "UPDATE_REJECTED"
    #: WAIT_RESULT's answer: the close comes to its `close_reply` (already sent when the
    #: run was closed); `attributes`: run_id waited on, closed.
    RESULT_WAIT_ACCEPTED = "RESULT_WAIT_ACCEPTED"
    #: The last answer to a TASK_COMPLETE that set a reply partition, after the
    #: ACTIVITY_TASK records of the activities it was given to run eagerly.
    TASK_PROCESSED = "TASK_PROCESSED"
    #: The answer to an activity's COMPLETE that carried the run's next workflow task's answer
    #: (`workflow_task_answer`): `attributes` {"accepted": bool}; accepted, `history` holds
    #: the task's WORKFLOW_TASK_SCHEDULED as written (`engine/workflows/ride_along.py`).
    RODE_ALONG = "RODE_ALONG"
    #: Not an event: the record a workflow worker receives on workflow-tasks.<queue>.
    WORKFLOW_TASK = "WORKFLOW_TASK"
    #: Not an event: a query for a workflow worker on workflow-tasks.<queue>.
    QUERY_TASK = "QUERY_TASK"


class ScheduleIntent(StrEnum):
    """Schedule commands, events and answers (Temporal's Schedules, docs/schedules.md)."""

    # commands from clients
    CREATE = "CREATE"
    UPDATE = "UPDATE"
    #: Trigger now, backfill a range, pause or unpause (Temporal's PatchSchedule).
    PATCH = "PATCH"
    DELETE = "DELETE"
    DESCRIBE = "DESCRIBE"
    #: The schedules of one partition (a client asks every partition).
    LIST = "LIST"
    #: From the due-date checker: the next action time came (re-checked; stale -> rejection).
    TRIGGER = "TRIGGER"
    # commands from a workflow's partition about a workflow the schedule started (a start
    # that succeeds is not answered: the schedule chose the run id)
    WORKFLOW_START_FAILED = "WORKFLOW_START_FAILED"
    #: The workflow's chain of runs ended (attributes: status, result or failure).
    WORKFLOW_CLOSED = "WORKFLOW_CLOSED"
    # events
    CREATED = "CREATED"
    UPDATED = "UPDATED"
    PAUSED = "PAUSED"
    UNPAUSED = "UNPAUSED"
    DELETED = "DELETED"
    #: Manual actions accepted (a trigger, backfills): their starts are buffered.
    PATCHED = "PATCHED"
    #: A workflow start sent for an action (attributes: nominal and actual time, overlap).
    ACTION_STARTED = "ACTION_STARTED"
    #: Actions not taken (attributes: how many, and why: overlap, catch-up window, buffer full).
    ACTIONS_SKIPPED = "ACTIONS_SKIPPED"
    #: A started workflow's answer or close, as the schedule recorded it.
    WORKFLOW_RECORDED = "WORKFLOW_RECORDED"
    # answers on the replies topic
    DESCRIBED = "DESCRIBED"
    LISTED = "LISTED"


class JobStreamIntent(StrEnum):
    """Job stream commands and events: a worker asks each partition to push it startable jobs
    of a queue (up to its credits), instead of taking them from tasks.<queue>."""

    # commands from a worker, sent to each engine partition
    REGISTER = "REGISTER"
    #: Credits and lease again (credits 0: push nothing for now); unknown stream -> NOT_FOUND.
    RENEW = "RENEW"
    UNREGISTER = "UNREGISTER"
    #: From the due-date checker: the lease ended (re-checked; stale -> rejection).
    EXPIRE = "EXPIRE"
    # events
    REGISTERED = "REGISTERED"
    RENEWED = "RENEWED"
    UNREGISTERED = "UNREGISTERED"
    EXPIRED = "EXPIRED"


class IncidentIntent(StrEnum):
    CREATED = "CREATED"
    RESOLVED = "RESOLVED"


class RejectionType(StrEnum):
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    NOT_FOUND = "NOT_FOUND"
    INVALID_STATE = "INVALID_STATE"
    #: The bytes are not a record of any schema we know.
    UNDECODABLE = "UNDECODABLE"
    #: A well-formed record whose value type or intent no processor handles.
    UNKNOWN_COMMAND = "UNKNOWN_COMMAND"
    EXCEEDED_SIZE = "EXCEEDED_SIZE"
    #: The processor raised: a bug, reported instead of stopping the partition.
    PROCESSING_ERROR = "PROCESSING_ERROR"
    ALREADY_EXISTS = "ALREADY_EXISTS"
    #: A per-entity limit is reached (e.g. the clients waiting for one run's result).
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"


@dataclasses.dataclass(slots=True)
class Record:
    """One record on any streamproc topic; `value` is the value record (JobRecord, ...) as a dict."""

    record_type: RecordType
    value_type: str
    intent: str
    value: dict[str, Any] | None = None
    key: int = -1
    partition_id: int = -1
    source_position: int = -1
    timestamp_ms: int = 0
    request_id: str | None = None
    rejection_type: str | None = None
    rejection_reason: str | None = None
    reply_partition: int = -1
    #: The Avro bytes, once encoded by the processor that wrote the record.
    encoded: bytes | None = dataclasses.field(default=None, compare=False, repr=False)
    #: A command that travels in a batch (`command_batches.py`): its part's JSON, once made.
    packed: bytes | None = dataclasses.field(default=None, compare=False, repr=False)
    #: A batch made in this process: its commands, so that processing it here needs no decoding.
    parts: list[Record] | None = dataclasses.field(default=None, compare=False, repr=False)
    #: A command processed in the transaction that writes it (`engine/relay.py`): on the
    #: log marked as processed, skipped when read back.
    relayed: bool = dataclasses.field(default=False, compare=False, repr=False)

    @classmethod
    def command(cls, value_type: str, intent: str, value: dict[str, Any] | None = None,
                key: int = -1, request_id: str | None = None, reply_partition: int = -1) -> Record:
        return cls(COMMAND, value_type, intent, value, key=key, request_id=request_id,
                   reply_partition=reply_partition)

    @property
    def is_command(self) -> bool:
        return self.record_type is COMMAND
