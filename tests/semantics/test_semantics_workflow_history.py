"""Event history: Temporal's event type numbers (SEMANTICS.md 6.1) and every canonical
sequence of 6.2 as a well-formed history, plus simulated histories. Broken histories are
in ``test_semantics_workflow_history_broken.py``, limits (6.3) in ``..._history_limits.py``."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamproc.semantics import (
    CLOSE_EVENT_TYPES,
    EventType,
    HistoryEvent,
    check_well_formed,
)
from tests.support.histories import COMPLETED, SIGNALED, STARTED, E, history, init, sched, sched_started, task



# --- 6.1 numbering ------------------------------------------------------------------

SPEC_NUMBERS = """
1 WorkflowExecutionStarted 2 WorkflowExecutionCompleted 3 WorkflowExecutionFailed
4 WorkflowExecutionTimedOut 5 WorkflowTaskScheduled 6 WorkflowTaskStarted
7 WorkflowTaskCompleted 8 WorkflowTaskTimedOut 9 WorkflowTaskFailed
10 ActivityTaskScheduled 11 ActivityTaskStarted 12 ActivityTaskCompleted
13 ActivityTaskFailed 14 ActivityTaskTimedOut 15 ActivityTaskCancelRequested
16 ActivityTaskCanceled 17 TimerStarted 18 TimerFired 19 TimerCanceled
20 WorkflowExecutionCancelRequested 21 WorkflowExecutionCanceled
22 RequestCancelExternalWorkflowExecutionInitiated
23 RequestCancelExternalWorkflowExecutionFailed
24 ExternalWorkflowExecutionCancelRequested 25 MarkerRecorded
26 WorkflowExecutionSignaled 27 WorkflowExecutionTerminated
28 WorkflowExecutionContinuedAsNew 29 StartChildWorkflowExecutionInitiated
30 StartChildWorkflowExecutionFailed 31 ChildWorkflowExecutionStarted
32 ChildWorkflowExecutionCompleted 33 ChildWorkflowExecutionFailed
34 ChildWorkflowExecutionCanceled 35 ChildWorkflowExecutionTimedOut
36 ChildWorkflowExecutionTerminated 37 SignalExternalWorkflowExecutionInitiated
38 SignalExternalWorkflowExecutionFailed 39 ExternalWorkflowExecutionSignaled
40 UpsertWorkflowSearchAttributes 41 WorkflowExecutionUpdateAccepted
42 WorkflowExecutionUpdateRejected 43 WorkflowExecutionUpdateCompleted
44 WorkflowPropertiesModifiedExternally 45 ActivityPropertiesModifiedExternally
46 WorkflowPropertiesModified 47 WorkflowExecutionUpdateAdmitted
48 NexusOperationScheduled 49 NexusOperationStarted 50 NexusOperationCompleted
51 NexusOperationFailed 52 NexusOperationCanceled 53 NexusOperationTimedOut
54 NexusOperationCancelRequested 55 WorkflowExecutionOptionsUpdated
56 NexusOperationCancelRequestCompleted 57 NexusOperationCancelRequestFailed
58 WorkflowExecutionPaused 59 WorkflowExecutionUnpaused
60 WorkflowExecutionTimeSkippingTransitioned
"""


def test_event_type_numbers() -> None:
    words = SPEC_NUMBERS.split()
    expected = {int(number): name for number, name in zip(words[::2], words[1::2])}
    assert {t.value: t.event_name for t in EventType if t} == expected
    assert E.TIMER_FIRED.proto_name == "EVENT_TYPE_TIMER_FIRED"
    assert E(0) is E.UNSPECIFIED


# --- 6.2 canonical histories --------------------------------------------------------

GOOD = {
    "start-one-activity-complete": history(
        STARTED, *task(2), (E.ACTIVITY_TASK_SCHEDULED, {"activity_id": "1"}),
        (E.ACTIVITY_TASK_STARTED, {"scheduled_event_id": 5, "attempt": 2}),
        (E.ACTIVITY_TASK_COMPLETED, sched_started(5, 6)), *task(8),
        (COMPLETED, {"new_execution_run_id": ""}),
    ),
    "delayed-first-task": history(
        (E.WORKFLOW_EXECUTION_STARTED, {"first_workflow_task_backoff_ms": 26 * 60_000}),
        *task(2), COMPLETED,
    ),
    "workflow-task-timeout-then-transient-task": history(
        STARTED, *task(2, E.WORKFLOW_TASK_TIMED_OUT, timeout_type="START_TO_CLOSE"),
        *task(5), COMPLETED,
    ),
    "timer-fired": history(
        STARTED, *task(2), (E.TIMER_STARTED, {"timer_id": "t1"}),
        (E.TIMER_FIRED, {"timer_id": "t1", "started_event_id": 5}), *task(7), COMPLETED,
    ),
    "timer-canceled": history(
        STARTED, *task(2), (E.TIMER_STARTED, {"timer_id": "t1"}), SIGNALED, *task(7),
        (E.TIMER_CANCELED, {"timer_id": "t1", "started_event_id": 5}), COMPLETED,
    ),
    "timer-id-reused-after-firing": history(
        STARTED, *task(2), (E.TIMER_STARTED, {"timer_id": "t1"}),
        (E.TIMER_FIRED, {"started_event_id": 5}), *task(7),
        (E.TIMER_STARTED, {"timer_id": "t1"}), (E.TIMER_FIRED, {"started_event_id": 10}),
        *task(12), COMPLETED,
    ),
    "signal-flushed-after-task": history(STARTED, *task(2), SIGNALED, *task(6), COMPLETED),
    "signal-before-task-starts": history(
        STARTED, E.WORKFLOW_TASK_SCHEDULED, SIGNALED, (E.WORKFLOW_TASK_STARTED, sched(2)),
        (E.WORKFLOW_TASK_COMPLETED, sched_started(2, 4)), COMPLETED,
    ),
    "activity-cancel-not-started": history(
        STARTED, *task(2), (E.ACTIVITY_TASK_SCHEDULED, {"activity_id": "1"}), SIGNALED,
        *task(7), (E.ACTIVITY_TASK_CANCEL_REQUESTED, sched(5)),
        (E.ACTIVITY_TASK_CANCELED, {**sched(5), "details": "ACTIVITY_ID_NOT_STARTED"}),
        *task(12), COMPLETED,
    ),
    "activity-cancel-started": history(
        STARTED, *task(2), (E.ACTIVITY_TASK_SCHEDULED, {"activity_id": "1"}), SIGNALED,
        *task(7), (E.ACTIVITY_TASK_CANCEL_REQUESTED, sched(5)),
        (E.ACTIVITY_TASK_STARTED, sched(5)), (E.ACTIVITY_TASK_CANCELED, sched_started(5, 11)),
        *task(13), COMPLETED,
    ),
    "activity-retries-exhausted-failed": history(
        STARTED, *task(2), E.ACTIVITY_TASK_SCHEDULED,
        (E.ACTIVITY_TASK_STARTED, {"scheduled_event_id": 5, "attempt": 5}),
        (E.ACTIVITY_TASK_FAILED, {**sched_started(5, 6), "retry_state": 4}), *task(8),
        E.WORKFLOW_EXECUTION_FAILED,
    ),
    "activity-retries-exhausted-timed-out": history(
        STARTED, *task(2), E.ACTIVITY_TASK_SCHEDULED,
        (E.ACTIVITY_TASK_STARTED, {"scheduled_event_id": 5, "attempt": 3}),
        (E.ACTIVITY_TASK_TIMED_OUT, sched_started(5, 6)), *task(8), COMPLETED,
    ),
    "activity-results-buffered-during-a-task": history(
        STARTED, *task(2), (E.ACTIVITY_TASK_SCHEDULED, {"activity_id": "a"}),
        (E.ACTIVITY_TASK_SCHEDULED, {"activity_id": "b"}), SIGNALED, *task(8)[:2],
        # Both activities closed while task 8 was in flight; the flush after its
        # completion puts the buffered completions after the other buffered events.
        (E.WORKFLOW_TASK_COMPLETED, sched_started(8, 9)),
        (E.ACTIVITY_TASK_STARTED, sched(5)), (E.ACTIVITY_TASK_STARTED, sched(6)),
        SIGNALED, (E.ACTIVITY_TASK_COMPLETED, sched_started(5, 11)),
        (E.ACTIVITY_TASK_FAILED, sched_started(6, 12)), *task(16), COMPLETED,
    ),
    "activity-schedule-to-close-before-start": history(
        STARTED, *task(2), E.ACTIVITY_TASK_SCHEDULED,
        (E.ACTIVITY_TASK_TIMED_OUT, sched_started(5, 0)), *task(7), COMPLETED,
    ),
    "child-completed": history(
        STARTED, *task(2), E.START_CHILD_WORKFLOW_EXECUTION_INITIATED,
        (E.CHILD_WORKFLOW_EXECUTION_STARTED, init(5)), *task(7),
        (E.CHILD_WORKFLOW_EXECUTION_COMPLETED, init(5, started_event_id=6)), *task(11),
        COMPLETED,
    ),
    "child-already-exists": history(
        STARTED, *task(2), E.START_CHILD_WORKFLOW_EXECUTION_INITIATED,
        (E.START_CHILD_WORKFLOW_EXECUTION_FAILED, init(5, cause="WORKFLOW_ALREADY_EXISTS")),
        *task(7), E.WORKFLOW_EXECUTION_FAILED,
    ),
    "external-signal-and-cancel": history(
        STARTED, *task(2), E.SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED,
        E.REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED,
        (E.EXTERNAL_WORKFLOW_EXECUTION_SIGNALED, init(5)),
        (E.EXTERNAL_WORKFLOW_EXECUTION_CANCEL_REQUESTED, init(6)), *task(9), COMPLETED,
    ),
    "marker-and-search-attributes": history(
        STARTED, *task(2), E.MARKER_RECORDED, E.UPSERT_WORKFLOW_SEARCH_ATTRIBUTES, COMPLETED,
    ),
    "cancel": history(
        STARTED, *task(2), (E.TIMER_STARTED, {"timer_id": "t1"}),
        E.WORKFLOW_EXECUTION_CANCEL_REQUESTED, *task(7),
        (E.TIMER_CANCELED, {"started_event_id": 5}), E.WORKFLOW_EXECUTION_CANCELED,
    ),
    "terminate-with-started-task": history(
        STARTED, *task(2, E.WORKFLOW_TASK_FAILED, cause="FORCE_CLOSE_COMMAND"),
        (E.WORKFLOW_EXECUTION_TERMINATED, {"identity": "history-service"}),
    ),
    "terminate-with-scheduled-task": history(
        STARTED, E.WORKFLOW_TASK_SCHEDULED, E.WORKFLOW_EXECUTION_TERMINATED
    ),
    "continue-as-new": history(
        STARTED, *task(2),
        (E.WORKFLOW_EXECUTION_CONTINUED_AS_NEW, {"new_execution_run_id": "r2", "initiator": 1}),
    ),
    "continued-run": history(
        (E.WORKFLOW_EXECUTION_STARTED, {"continued_execution_run_id": "r1", "initiator": 1}),
        *task(2), COMPLETED,
    ),
    "retry-hand-off": history(
        STARTED, *task(2),
        (E.WORKFLOW_EXECUTION_FAILED, {"retry_state": 1, "new_execution_run_id": "r2"}),
    ),
    "retry-run": history(
        (E.WORKFLOW_EXECUTION_STARTED, {"initiator": 2, "attempt": 2}), *task(2), COMPLETED,
    ),
    "run-timeout-waiting-on-activity": history(
        STARTED, *task(2), E.ACTIVITY_TASK_SCHEDULED,
        (E.WORKFLOW_EXECUTION_TIMED_OUT, {"retry_state": 5}),
    ),
    "run-timeout-force-closes-started-task": history(
        STARTED, *task(2, E.WORKFLOW_TASK_FAILED, cause="FORCE_CLOSE_COMMAND"),
        E.WORKFLOW_EXECUTION_TIMED_OUT,
    ),
    "sticky-schedule-to-start-timeout": history(
        STARTED, *task(2), SIGNALED, E.WORKFLOW_TASK_SCHEDULED,
        (E.WORKFLOW_TASK_TIMED_OUT, {"timeout_type": "SCHEDULE_TO_START", **sched_started(6, 0)}),
        *task(8), COMPLETED,
    ),
}  # fmt: skip


@pytest.mark.parametrize("events", GOOD.values(), ids=GOOD.keys())
def test_canonical_histories_are_well_formed(events) -> None:
    assert check_well_formed(events) == []


def test_observed_eleven_event_history_matches_the_types_seen_on_a_server() -> None:
    types = [t.event_name for _, t, _ in GOOD["start-one-activity-complete"]]
    assert types == [
        "WorkflowExecutionStarted", "WorkflowTaskScheduled", "WorkflowTaskStarted",
        "WorkflowTaskCompleted", "ActivityTaskScheduled", "ActivityTaskStarted",
        "ActivityTaskCompleted", "WorkflowTaskScheduled", "WorkflowTaskStarted",
        "WorkflowTaskCompleted", "WorkflowExecutionCompleted",
    ]  # fmt: skip


RUNNING = {
    "task-in-flight": history(STARTED, E.WORKFLOW_TASK_SCHEDULED, (E.WORKFLOW_TASK_STARTED, sched(2))),
    "waiting-on-activity": history(STARTED, *task(2), E.ACTIVITY_TASK_SCHEDULED),
}  # fmt: skip


@pytest.mark.parametrize("events", RUNNING.values(), ids=RUNNING.keys())
def test_running_histories_are_well_formed_when_not_required_closed(events) -> None:
    assert check_well_formed(events, closed=False) == []
    assert check_well_formed(events) == ["history has no close event"]


def test_event_types_may_be_given_as_numbers() -> None:
    numbered = [(i, int(t), a) for i, t, a in GOOD["start-one-activity-complete"]]
    assert check_well_formed(numbered) == []


# --- random well-formed histories ---------------------------------------------------


def flush(add, buffered: list[int], draw) -> None:
    """Write buffered activity results the way the server flushes them: each attempt's
    ActivityTaskStarted (and any signal) first, the completions last."""
    if not buffered:
        return
    started = {scheduled_id: add(E.ACTIVITY_TASK_STARTED, scheduled_event_id=scheduled_id)
               for scheduled_id in buffered}  # fmt: skip
    if draw(st.booleans()):
        add(SIGNALED)
    for scheduled_id, started_id in started.items():
        outcome = draw(st.sampled_from([E.ACTIVITY_TASK_COMPLETED, E.ACTIVITY_TASK_FAILED]))
        add(outcome, scheduled_event_id=scheduled_id, started_event_id=started_id)


@st.composite
def well_formed_histories(draw) -> list[HistoryEvent]:
    """Simulate a workflow: each round is one workflow task issuing commands, followed by
    whatever the outside world delivers before the next task."""
    events: list[HistoryEvent] = []

    def add(event_type: EventType, **attrs: Any) -> int:
        events.append((len(events) + 1, event_type, attrs))
        return len(events)

    add(E.WORKFLOW_EXECUTION_STARTED)
    activities: list[int] = []
    timers: list[int] = []
    for round_number in range(draw(st.integers(min_value=1, max_value=6))):
        scheduled = add(E.WORKFLOW_TASK_SCHEDULED)
        if draw(st.booleans()):
            add(SIGNALED)
        started = add(E.WORKFLOW_TASK_STARTED, scheduled_event_id=scheduled)
        # Activities that close while the task is in flight are buffered until it ends.
        buffered = [
            activities.pop(0) for _ in range(draw(st.integers(0, min(2, len(activities)))))
        ]
        if draw(st.integers(0, 4)) == 0:
            add(E.WORKFLOW_TASK_FAILED, scheduled_event_id=scheduled, started_event_id=started)
            flush(add, buffered, draw)
            continue
        add(E.WORKFLOW_TASK_COMPLETED, scheduled_event_id=scheduled, started_event_id=started)
        for _ in range(draw(st.integers(0, 2))):
            activities.append(add(E.ACTIVITY_TASK_SCHEDULED, activity_id=f"a{len(events)}"))
        for _ in range(draw(st.integers(0, 2))):
            timers.append(add(E.TIMER_STARTED, timer_id=f"t{len(events)}"))
        if timers and draw(st.booleans()):
            add(E.TIMER_CANCELED, started_event_id=timers.pop(0))
        flush(add, buffered, draw)
        if draw(st.integers(0, 5)) == 0:
            break
        for _ in range(draw(st.integers(0, 3))):
            choice = draw(st.sampled_from(["activity", "timer", "signal"]))
            if choice == "activity" and activities:
                scheduled_id = activities.pop(draw(st.integers(0, len(activities) - 1)))
                started_id = add(E.ACTIVITY_TASK_STARTED, scheduled_event_id=scheduled_id)
                outcome = draw(st.sampled_from([E.ACTIVITY_TASK_COMPLETED, E.ACTIVITY_TASK_FAILED]))
                add(outcome, scheduled_event_id=scheduled_id, started_event_id=started_id)
            elif choice == "timer" and timers:
                add(E.TIMER_FIRED, started_event_id=timers.pop(0))
            else:
                add(SIGNALED)
    if events[-1][1] in (E.WORKFLOW_TASK_COMPLETED, E.TIMER_CANCELED, E.TIMER_STARTED,
                         E.ACTIVITY_TASK_SCHEDULED):  # fmt: skip
        add(COMPLETED)
    else:
        add(E.WORKFLOW_EXECUTION_TERMINATED)
    return events


@given(well_formed_histories())
def test_simulated_histories_are_well_formed(events) -> None:
    assert check_well_formed(events) == []


# Dropping any of these (and renumbering) always leaves a trace; dropping, say, a signal
# or a timer that fired does not.
STRUCTURAL = frozenset(
    {
        E.WORKFLOW_EXECUTION_STARTED,
        E.WORKFLOW_TASK_SCHEDULED,
        E.WORKFLOW_TASK_STARTED,
        E.WORKFLOW_TASK_COMPLETED,
        E.WORKFLOW_TASK_FAILED,
        E.ACTIVITY_TASK_STARTED,
        E.ACTIVITY_TASK_COMPLETED,
        E.ACTIVITY_TASK_FAILED,
        *CLOSE_EVENT_TYPES,
    }
)


def drop_and_renumber(events: list[HistoryEvent], index: int) -> list[HistoryEvent]:
    dropped = events[index][0]

    def remap(value: Any) -> Any:
        if not isinstance(value, int) or value == 0:
            return value
        return 0 if value == dropped else value - (value > dropped)

    kept = events[:index] + events[index + 1 :]
    return [
        (
            position,
            event_type,
            {k: remap(v) if k.endswith("_event_id") else v for k, v in attrs.items()},
        )
        for position, (_, event_type, attrs) in enumerate(kept, start=1)
    ]


@given(well_formed_histories(), st.data())
def test_dropping_a_structural_event_is_noticed(events, data) -> None:
    candidates = [i for i, (_, t, _) in enumerate(events) if t in STRUCTURAL]
    index = data.draw(st.sampled_from(candidates))
    assert check_well_formed(drop_and_renumber(events, index)) != []


def test_close_event_types() -> None:
    assert {t.event_name for t in CLOSE_EVENT_TYPES} == {
        "WorkflowExecutionCompleted",
        "WorkflowExecutionFailed",
        "WorkflowExecutionTimedOut",
        "WorkflowExecutionCanceled",
        "WorkflowExecutionTerminated",
        "WorkflowExecutionContinuedAsNew",
    }
