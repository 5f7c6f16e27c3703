"""Broken histories: each breaks one rule of SEMANTICS.md 6.2 and must be reported."""

from __future__ import annotations

import pytest

from streamproc.semantics import check_well_formed

from tests.support.histories import COMPLETED, SIGNALED, STARTED, E, history, init, sched, sched_started, task




# --- broken histories ---------------------------------------------------------------

ONE_ACTIVITY = history(
    STARTED, *task(2), E.ACTIVITY_TASK_SCHEDULED, (E.ACTIVITY_TASK_STARTED, sched(5)),
    (E.ACTIVITY_TASK_COMPLETED, sched_started(5, 6)), *task(8), COMPLETED,
)  # fmt: skip

BROKEN = [
    ("empty", [], "history is empty"),
    (
        "ids-skip",
        ONE_ACTIVITY[:2] + [(4, t, a) for _, t, a in ONE_ACTIVITY[2:3]] + ONE_ACTIVITY[3:],
        "event 4 WorkflowTaskStarted: expected event id 3",
    ),
    (
        "first-event-not-started",
        history(*task(1), COMPLETED),
        "event 1 WorkflowTaskScheduled: the first event, and only it, must be"
        " WorkflowExecutionStarted",
    ),
    (
        "second-started-event",
        history(STARTED, *task(2), STARTED, COMPLETED),
        "event 5 WorkflowExecutionStarted: the first event, and only it",
    ),
    (
        "two-close-events",
        history(STARTED, *task(2), COMPLETED, E.WORKFLOW_EXECUTION_TERMINATED),
        "more than one close event: events [5, 6]",
    ),
    (
        "close-not-last",
        history(STARTED, *task(2), COMPLETED, SIGNALED),
        "close event 5 is not the last event",
    ),
    ("no-close-event", history(STARTED, *task(2)), "history has no close event"),
    (
        "started-without-scheduled",
        history(STARTED, E.WORKFLOW_TASK_STARTED, E.WORKFLOW_EXECUTION_TERMINATED),
        "event 2 WorkflowTaskStarted: no WorkflowTaskScheduled is waiting to start",
    ),
    (
        "completed-without-started",
        history(STARTED, E.WORKFLOW_TASK_SCHEDULED, E.WORKFLOW_TASK_COMPLETED, COMPLETED),
        "event 3 WorkflowTaskCompleted: no workflow task is started",
    ),
    (
        "two-pending-tasks",
        history(STARTED, E.WORKFLOW_TASK_SCHEDULED, E.WORKFLOW_TASK_SCHEDULED),
        "event 3 WorkflowTaskScheduled: workflow task 2 is pending",
    ),
    (
        "wrong-scheduled-event-id",
        history(STARTED, E.WORKFLOW_TASK_SCHEDULED, (E.WORKFLOW_TASK_STARTED, sched(9))),
        "event 3 WorkflowTaskStarted: scheduled_event_id should be 2",
    ),
    (
        "wrong-started-event-id",
        history(STARTED, *task(2)[:2], (E.WORKFLOW_TASK_COMPLETED, sched_started(2, 7))),
        "event 4 WorkflowTaskCompleted: started_event_id should be 3",
    ),
    (
        "signal-while-task-in-flight",
        history(STARTED, *task(2)[:2], SIGNALED, E.WORKFLOW_TASK_COMPLETED, COMPLETED),
        "event 4 WorkflowExecutionSignaled: written while the workflow task started at event 3"
        " was in flight",
    ),
    (
        "terminate-without-force-closing-started-task",
        history(STARTED, *task(2)[:2], E.WORKFLOW_EXECUTION_TERMINATED),
        "event 4 WorkflowExecutionTerminated: written while the workflow task started",
    ),
    (
        "schedule-to-start-timeout-after-start",
        history(
            STARTED, *task(2)[:2],
            (E.WORKFLOW_TASK_TIMED_OUT, {"timeout_type": "SCHEDULE_TO_START"}),
        ),
        "event 4 WorkflowTaskTimedOut: no workflow task is scheduled and not started",
    ),
    (
        "command-outside-batch",
        history(STARTED, E.WORKFLOW_TASK_SCHEDULED, E.ACTIVITY_TASK_SCHEDULED),
        "event 3 ActivityTaskScheduled: a command event outside the batch of a"
        " WorkflowTaskCompleted",
    ),
    (
        "command-after-buffered-signal",
        history(STARTED, *task(2), SIGNALED, E.TIMER_STARTED),
        "event 6 TimerStarted: a command event outside the batch",
    ),
    (
        "close-command-outside-batch",
        history(STARTED, *task(2), SIGNALED, COMPLETED),
        "event 6 WorkflowExecutionCompleted: a command event outside the batch",
    ),
    (
        "activity-started-unknown",
        history(STARTED, *task(2), (E.ACTIVITY_TASK_STARTED, sched(99))),
        "event 5 ActivityTaskStarted: scheduled_event_id 99 is not an open ActivityTaskScheduled",
    ),
    (
        "activity-reference-missing",
        history(STARTED, *task(2), E.ACTIVITY_TASK_SCHEDULED, E.ACTIVITY_TASK_TIMED_OUT),
        "event 6 ActivityTaskTimedOut: scheduled_event_id None is not an open"
        " ActivityTaskScheduled",
    ),
    (
        "activity-completed-without-start",
        history(
            STARTED, *task(2), E.ACTIVITY_TASK_SCHEDULED,
            (E.ACTIVITY_TASK_COMPLETED, sched(5)),
        ),
        "event 6 ActivityTaskCompleted: ActivityTaskScheduled 5 is not started",
    ),
    (
        "activity-closed-twice",
        history(
            STARTED, *task(2), E.ACTIVITY_TASK_SCHEDULED, (E.ACTIVITY_TASK_TIMED_OUT, sched(5)),
            (E.ACTIVITY_TASK_TIMED_OUT, sched(5)),
        ),
        "event 7 ActivityTaskTimedOut: scheduled_event_id 5 is not an open ActivityTaskScheduled",
    ),
    (
        "activity-started-without-its-close",
        history(
            STARTED, *task(2), E.ACTIVITY_TASK_SCHEDULED, (E.ACTIVITY_TASK_STARTED, sched(5)),
            SIGNALED, *task(8), COMPLETED,
        ),
        "event 8 WorkflowTaskScheduled: ActivityTaskStarted 6 has no close event before it",
    ),
    (
        "activity-started-last",
        history(STARTED, *task(2), E.ACTIVITY_TASK_SCHEDULED, (E.ACTIVITY_TASK_STARTED, sched(5))),
        "event 6 ActivityTaskStarted: its close event is missing",
    ),
    (
        "activity-closed-after-the-next-command",
        history(
            STARTED, *task(2), E.ACTIVITY_TASK_SCHEDULED, SIGNALED, *task(7)[:2],
            (E.WORKFLOW_TASK_COMPLETED, sched_started(7, 8)), (E.ACTIVITY_TASK_STARTED, sched(5)),
            E.TIMER_STARTED, (E.ACTIVITY_TASK_COMPLETED, sched_started(5, 10)), COMPLETED,
        ),
        "event 11 TimerStarted: ActivityTaskStarted 10 has no close event before it",
    ),
    (
        "activity-canceled-without-request",
        history(
            STARTED, *task(2), E.ACTIVITY_TASK_SCHEDULED, (E.ACTIVITY_TASK_CANCELED, sched(5)),
        ),
        "event 6 ActivityTaskCanceled: ActivityTaskScheduled 5 is not cancel-requested",
    ),
    (
        "activity-cancel-requested-twice",
        history(
            STARTED, *task(2), E.ACTIVITY_TASK_SCHEDULED,
            (E.ACTIVITY_TASK_CANCEL_REQUESTED, sched(5)),
            (E.ACTIVITY_TASK_CANCEL_REQUESTED, sched(5)),
        ),
        "event 7 ActivityTaskCancelRequested: ActivityTaskScheduled 5 is already"
        " cancel-requested",
    ),
    (
        "duplicate-open-activity-id",
        history(
            STARTED, *task(2), (E.ACTIVITY_TASK_SCHEDULED, {"activity_id": "1"}),
            (E.ACTIVITY_TASK_SCHEDULED, {"activity_id": "1"}),
        ),
        "event 6 ActivityTaskScheduled: activity_id '1' is already open",
    ),
    (
        "timer-fired-twice",
        history(
            STARTED, *task(2), E.TIMER_STARTED, (E.TIMER_FIRED, {"started_event_id": 5}),
            (E.TIMER_FIRED, {"started_event_id": 5}),
        ),
        "event 7 TimerFired: started_event_id 5 is not an open TimerStarted",
    ),
    (
        "timer-fired-references-an-activity",
        history(
            STARTED, *task(2), E.ACTIVITY_TASK_SCHEDULED,
            (E.TIMER_FIRED, {"started_event_id": 5}),
        ),
        "event 6 TimerFired: started_event_id 5 is not an open TimerStarted",
    ),
    (
        "duplicate-open-timer-id",
        history(
            STARTED, *task(2), (E.TIMER_STARTED, {"timer_id": "t"}),
            (E.TIMER_STARTED, {"timer_id": "t"}),
        ),
        "event 6 TimerStarted: timer_id 't' is already open",
    ),
    (
        "child-completed-before-started",
        history(
            STARTED, *task(2), E.START_CHILD_WORKFLOW_EXECUTION_INITIATED,
            (E.CHILD_WORKFLOW_EXECUTION_COMPLETED, init(5)),
        ),
        "event 6 ChildWorkflowExecutionCompleted: StartChildWorkflowExecutionInitiated 5 is not"
        " started",
    ),
    (
        "child-start-failed-after-start",
        history(
            STARTED, *task(2), E.START_CHILD_WORKFLOW_EXECUTION_INITIATED,
            (E.CHILD_WORKFLOW_EXECUTION_STARTED, init(5)),
            (E.START_CHILD_WORKFLOW_EXECUTION_FAILED, init(5)),
        ),
        "event 7 StartChildWorkflowExecutionFailed: StartChildWorkflowExecutionInitiated 5 is"
        " already started",
    ),
    (
        "external-signal-unknown",
        history(STARTED, *task(2), (E.EXTERNAL_WORKFLOW_EXECUTION_SIGNALED, init(3))),
        "event 5 ExternalWorkflowExecutionSignaled: initiated_event_id 3 is not an open"
        " SignalExternalWorkflowExecutionInitiated",
    ),
    (
        "canceled-without-request",
        history(STARTED, *task(2), E.WORKFLOW_EXECUTION_CANCELED),
        "event 5 WorkflowExecutionCanceled: no WorkflowExecutionCancelRequested before it",
    ),
    (
        "unknown-event-type",
        [(1, E.WORKFLOW_EXECUTION_STARTED, {}), (2, 999, {}), (3, COMPLETED, {})],
        "event 2: unknown event type 999",
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("events", "expected"), [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN]
)
def test_broken_histories_are_reported(events, expected) -> None:
    problems = check_well_formed(events)
    assert any(problem.startswith(expected) for problem in problems), problems


def test_the_base_history_of_the_mutations_is_well_formed() -> None:
    assert check_well_formed(ONE_ACTIVITY) == []
