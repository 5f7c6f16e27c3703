"""Every WORKFLOW command and the processor that handles it (docs/workflow-protocol.md)."""

from __future__ import annotations

from streamproc.engine.workflows import children, externals, queries, requests, signals, updates
from streamproc.engine.workflows import tasks
from streamproc.engine.workflows import timeouts
from streamproc.engine.workflows.start import start
from streamproc.protocol.records import WorkflowIntent as W

WORKFLOW_PROCESSORS = {
    W.START: start,
    W.REQUEST_CANCEL: requests.request_cancel,
    W.TERMINATE: requests.terminate_request,
    W.DESCRIBE: requests.describe,
    W.GET_HISTORY: requests.get_history,
    W.WAIT_RESULT: requests.wait_result,
    W.SIGNAL: signals.signal,
    W.QUERY: queries.query,
    W.UPDATE: updates.update,
    W.POLL_UPDATE: updates.poll_update,
    W.CHILD_STARTED: children.child_started,
    W.CHILD_START_FAILED: children.child_start_failed,
    W.CHILD_CLOSED: children.child_closed,
    W.EXTERNAL_SIGNALED: externals.external_signaled,
    W.EXTERNAL_SIGNAL_FAILED: externals.external_signal_failed,
    W.EXTERNAL_CANCEL_REQUESTED: externals.external_cancel_requested,
    W.EXTERNAL_CANCEL_FAILED: externals.external_cancel_failed,
    W.TASK_COMPLETE: tasks.task_complete,
    W.TASK_FAIL: tasks.task_fail,
    W.JOURNAL_MARKERS: tasks.journal_markers,
    W.TASK_TIME_OUT: tasks.task_time_out,
    W.TIMER_FIRE: timeouts.timer_fire,
    W.RUN_TIME_OUT: timeouts.run_time_out,
    W.EXECUTION_TIME_OUT: timeouts.execution_time_out,
    W.BACKOFF_START: timeouts.backoff_start,
}
