"""A workflow worker's answer to one task, with the sticky cache (no broker, no SDK):
the run's instance is a fake that records what it was shown."""

from __future__ import annotations

import dataclasses

import orjson
import pytest

from streamproc.protocol.records import WorkflowIntent
from streamproc.worker.sticky_cache import StickyCache
from streamproc.worker.workflow_activation import UNHANDLED_FAILURE, WorkflowTaskHandler
from streamproc.worker.workflow_task_pages import TaskPageAssembler, WorkflowTask
from tests.support.workflow_tasks import RUN_KEY, after_completed_task, event, first_task_history, task_records

SCHEDULE = {"type": "SCHEDULE_ACTIVITY_TASK", "activity_id": "1", "activity_type": "reserve"}
COMPLETE = {"type": "COMPLETE_WORKFLOW_EXECUTION", "result": '"ok"'}


@dataclasses.dataclass
class Outcome:
    commands: list | None = None
    failure: object = None
    cause: str = ""


class FakeInstance:
    created: list[FakeInstance] = []

    def __init__(self, definition, history, run_id):
        self.definition = definition
        self.run_id = run_id
        self.shown = list(history)
        self.extended: list[list] = []
        self.answers = list(definition.answers)
        FakeInstance.created.append(self)

    def extend(self, events):
        self.extended.append(list(events))
        self.shown += events

    def activate(self):
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


@dataclasses.dataclass
class Definition:
    name: str
    answers: list


def handler(*answers, cache_size: int = 10) -> WorkflowTaskHandler:
    FakeInstance.created = []
    return WorkflowTaskHandler({"Order": Definition("Order", list(answers))}, "worker-1", FakeInstance,
                               StickyCache(cache_size))


def task(history, **options) -> WorkflowTask:
    return TaskPageAssembler().add(task_records(history, **options)[0])


def test_a_first_task_is_completed_with_the_commands_the_code_issued():
    h = handler(Outcome([SCHEDULE]))
    answer = h.answer(task(first_task_history()))
    assert answer.intent == WorkflowIntent.TASK_COMPLETE and answer.key == RUN_KEY
    assert answer.value["workflow_id"] == "wf-1" and answer.value["run_id"] == "run-1"
    assert answer.value["scheduled_event_id"] == 2 and answer.value["identity"] == "worker-1"
    assert orjson.loads(answer.value["commands"]) == [SCHEDULE]
    assert FakeInstance.created[0].shown == first_task_history()
    assert FakeInstance.created[0].run_id == "run-1"


def test_the_next_task_feeds_the_cached_instance_only_the_new_events():
    first = first_task_history()
    second = after_completed_task(first, ("ACTIVITY_TASK_SCHEDULED", {"activity_id": "1"}))
    h = handler(Outcome([SCHEDULE]), Outcome([COMPLETE]))
    h.answer(task(first))
    answer = h.answer(task(second))
    assert orjson.loads(answer.value["commands"]) == [COMPLETE]
    (instance,) = FakeInstance.created
    assert instance.extended == [second[2:]] and instance.shown == second
    assert h.cache.hits == 1
    assert "run-1" not in h.cache  # closed: nothing left to keep


def test_a_history_that_does_not_continue_the_cached_one_is_replayed_in_full():
    first = first_task_history()
    # The answer timed out: the engine wrote STARTED + TIMED_OUT and a new attempt.
    timed_out = [*first, event(3, "WORKFLOW_TASK_STARTED", scheduled_event_id=2),
                 event(4, "WORKFLOW_TASK_TIMED_OUT", scheduled_event_id=2, started_event_id=3),
                 event(5, "WORKFLOW_TASK_SCHEDULED", attempt=2)]
    h = handler(Outcome([SCHEDULE]), Outcome([SCHEDULE]))
    h.answer(task(first))
    FakeInstance.created[0].definition.answers[:] = [Outcome([SCHEDULE])]
    answer = h.answer(task(timed_out, attempt=2))
    assert len(FakeInstance.created) == 2 and FakeInstance.created[1].shown == timed_out
    assert h.cache.misses == 1
    # attempts of a transient task share their scheduled event id: the answer names its attempt
    assert (answer.value["scheduled_event_id"], answer.value["attempt"]) == (5, 2)


def test_another_workers_task_in_between_means_a_full_replay():
    first = first_task_history()
    second = after_completed_task(first, ("TIMER_STARTED", {"timer_id": "1"}))
    third = after_completed_task(second, ("TIMER_FIRED", {"timer_id": "1", "started_event_id": 5}))
    h = handler(Outcome([SCHEDULE]), Outcome([COMPLETE]))
    h.answer(task(first))
    h.answer(task(third))  # the second task went to another worker
    assert len(FakeInstance.created) == 2 and FakeInstance.created[1].shown == third


def test_an_instance_whose_answer_lost_to_another_workers_for_the_same_task_is_not_continued():
    """A task delivered twice (a rebalance before the offset was committed) is answered by
    two workers; the engine keeps one answer. The other worker's instance ran the task on
    its own (its local activities' results may differ): the task after, which it may get
    (handed back with an activity's completion, or the queue's partition moving back),
    must replay what the engine kept, not continue that instance."""
    first = first_task_history()
    second = after_completed_task(first, ("ACTIVITY_TASK_SCHEDULED", {"activity_id": "1"}), identity="worker-2")
    h = handler(Outcome([SCHEDULE]), Outcome([COMPLETE]))
    h.answer(task(first))
    FakeInstance.created[0].definition.answers[:] = [Outcome([SCHEDULE]), Outcome([COMPLETE])]
    h.answer(task(second))
    assert len(FakeInstance.created) == 2 and FakeInstance.created[1].shown == second
    assert h.cache.hits == 0


def test_a_task_this_worker_answered_twice_is_not_continued_from_either_answer():
    """The same task again (its batch answered a second time after the broker was away, or
    its partition came back before the offset was committed): the engine keeps the first
    answer that lands and refuses the other, and the worker cannot tell which one; its
    instance is not kept, the next task replays what the engine kept."""
    first = first_task_history()
    second = after_completed_task(first, ("ACTIVITY_TASK_SCHEDULED", {"activity_id": "1"}))
    h = handler(Outcome([SCHEDULE]))
    h.answer(task(first))
    FakeInstance.created[0].definition.answers[:] = [Outcome([SCHEDULE]), Outcome([SCHEDULE]), Outcome([COMPLETE])]
    h.answer(task(first))  # again
    h.answer(task(second))
    assert len(FakeInstance.created) == 3 and FakeInstance.created[2].shown == second
    assert h.cache.hits == 0


def test_a_non_determinism_failure_fails_the_task_and_forgets_the_instance():
    failure = {"message": "nondeterminism", "kind": "APPLICATION", "type": "NonDeterminismError"}
    h = handler(Outcome([SCHEDULE]), Outcome(None, failure, "NON_DETERMINISTIC_ERROR"))
    first = first_task_history()
    h.answer(task(first))
    answer = h.answer(task(after_completed_task(first)))
    assert answer.intent == WorkflowIntent.TASK_FAIL
    assert answer.value["cause"] == "NON_DETERMINISTIC_ERROR" and answer.value["failure"] == failure
    assert "run-1" not in h.cache


def test_a_retried_attempt_that_fails_again_is_left_to_time_out_and_a_later_one_can_complete():
    # Attempt 1 failed (WORKFLOW_TASK_FAILED); attempts 2.. are transient, shown with their Scheduled.
    first = first_task_history()
    failed = [*first, event(3, "WORKFLOW_TASK_STARTED", scheduled_event_id=2),
              event(4, "WORKFLOW_TASK_FAILED", scheduled_event_id=2, started_event_id=3),
              event(5, "WORKFLOW_TASK_SCHEDULED", attempt=2)]
    failure = {"message": "nondeterminism", "kind": "APPLICATION", "type": "NonDeterminismError"}
    h = handler(Outcome(None, failure, "NON_DETERMINISTIC_ERROR"))
    assert h.answer(task(failed, attempt=2)) is None
    answers = FakeInstance.created[0].definition.answers  # what each fresh replay answers
    answers[:] = [RuntimeError("runtime bug")]
    assert h.answer(task(failed, attempt=3)) is None  # whatever the failure
    assert "run-1" not in h.cache
    answers[:] = [Outcome([SCHEDULE])]
    answer = h.answer(task(failed, attempt=4))
    assert answer.intent == WorkflowIntent.TASK_COMPLETE and answer.value["attempt"] == 4


def test_an_exception_from_the_runtime_fails_the_task_with_an_unhandled_failure():
    h = handler(RuntimeError("runtime bug"))
    answer = h.answer(task(first_task_history()))
    assert answer.intent == WorkflowIntent.TASK_FAIL and answer.value["cause"] == UNHANDLED_FAILURE
    assert answer.value["failure"]["message"] == "runtime bug"
    assert answer.value["failure"]["type"] == "RuntimeError"


def test_an_unregistered_workflow_type_fails_the_task_with_a_clear_failure():
    h = handler()
    answer = h.answer(task(first_task_history(), workflow_type="Refund"))
    assert answer.intent == WorkflowIntent.TASK_FAIL and answer.value["cause"] == UNHANDLED_FAILURE
    assert answer.value["failure"]["message"] == (
        "Workflow class Refund is not registered on this worker, available workflows: Order")
    assert answer.value["failure"]["type"] == "NotFoundError"
    assert FakeInstance.created == []


def test_the_cache_is_a_bounded_lru():
    h = handler(*[Outcome([SCHEDULE])] * 3, cache_size=2)
    for run in ("a", "b", "c"):
        h.answer(task(first_task_history(), run_id=run))
    assert len(h.cache) == 2 and "a" not in h.cache and "c" in h.cache


def test_a_cache_of_size_zero_always_replays():
    first = first_task_history()
    h = handler(Outcome([SCHEDULE]), Outcome([COMPLETE]), cache_size=0)
    h.answer(task(first))
    FakeInstance.created[0].definition.answers[:] = [Outcome([COMPLETE])]
    h.answer(task(after_completed_task(first)))
    assert len(FakeInstance.created) == 2


# --- tasks that carry only the history after the previous completed task ---------------


class Fetcher:
    """GET_HISTORY as the engine answers it: the run's history as it is now."""

    def __init__(self, history=None, error: Exception | None = None):
        self.history = history
        self.error = error
        self.calls: list[WorkflowTask] = []

    def __call__(self, task):
        self.calls.append(task)
        if self.error is not None:
            raise self.error
        return self.history


def fetching_handler(fetcher: Fetcher, *answers) -> WorkflowTaskHandler:
    FakeInstance.created = []
    return WorkflowTaskHandler({"Order": Definition("Order", list(answers))}, "worker-1", FakeInstance,
                               StickyCache(10), fetcher)


def test_a_cached_run_continues_from_a_task_that_carries_only_the_new_events():
    first = first_task_history()
    second = after_completed_task(first, ("ACTIVITY_TASK_SCHEDULED", {"activity_id": "1"}))
    fetcher = Fetcher()
    h = fetching_handler(fetcher, Outcome([SCHEDULE]), Outcome([COMPLETE]))
    h.answer(task(first))
    partial = task(second[1:])  # from the answered task's Scheduled (event 2) on
    assert partial.first_event_id == 2 and not partial.is_whole
    answer = h.answer(partial)
    assert orjson.loads(answer.value["commands"]) == [COMPLETE]
    (instance,) = FakeInstance.created
    assert instance.extended == [second[2:]] and instance.shown == second
    assert fetcher.calls == [] and h.fetches == 0 and h.cache.hits == 1


def test_a_worker_without_the_run_cached_fetches_the_history_before_replaying():
    first = first_task_history()
    second = after_completed_task(first, ("TIMER_STARTED", {"timer_id": "1"}))
    later = [*second, event(len(second) + 1, "WORKFLOW_TASK_STARTED", scheduled_event_id=len(second))]
    fetcher = Fetcher(later)  # the engine's history may have grown since the task went out
    h = fetching_handler(fetcher, Outcome([COMPLETE]))
    answer = h.answer(task(second[1:]))
    assert answer.intent == WorkflowIntent.TASK_COMPLETE
    assert [t.run_id for t in fetcher.calls] == ["run-1"] and h.fetches == 1
    assert FakeInstance.created[0].shown == second  # fetched head, then the task's own events


def test_a_cached_run_that_missed_a_task_fetches_the_history():
    first = first_task_history()
    second = after_completed_task(first, ("TIMER_STARTED", {"timer_id": "1"}))
    third = after_completed_task(second, ("TIMER_FIRED", {"timer_id": "1", "started_event_id": 5}))
    fetcher = Fetcher(third)
    h = fetching_handler(fetcher, Outcome([SCHEDULE]), Outcome([COMPLETE]))
    h.answer(task(first))
    FakeInstance.created[0].definition.answers[:] = [Outcome([COMPLETE])]
    h.answer(task(third[5:]))  # from event 6: another worker answered the second task
    assert h.cache.misses == 1 and len(fetcher.calls) == 1
    assert len(FakeInstance.created) == 2 and FakeInstance.created[1].shown == third


@pytest.mark.parametrize("fetcher, message", [
    (Fetcher(error=TimeoutError("no answer to GET_HISTORY within 20.0 s")), "no answer to GET_HISTORY"),
    (Fetcher([event(1, "WORKFLOW_EXECUTION_STARTED")]), "GET_HISTORY returned 1 events"),
])
def test_a_history_that_cannot_be_fetched_fails_the_task(fetcher, message):
    second = after_completed_task(first_task_history())
    h = fetching_handler(fetcher, Outcome([COMPLETE]))
    answer = h.answer(task(second[2:]))  # events 3.. : events 1 and 2 are missing
    assert answer.intent == WorkflowIntent.TASK_FAIL and answer.value["cause"] == UNHANDLED_FAILURE
    failure = answer.value["failure"]
    assert failure["type"] == "HistoryUnavailable" and message in failure["message"]
    assert FakeInstance.created == [] and "run-1" not in h.cache
