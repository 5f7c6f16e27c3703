"""The worker side of handing the next workflow task back: which answers ask for it, how
a handed-back task reaches the polling thread, and how it shares an answer's replies with
eager activities (no broker: the replies listener is a fake)."""

from __future__ import annotations

import threading
import time

import orjson

from streamproc import workflow
from streamproc.kafka import replies as replies_module
from streamproc.kafka.replies import Reply, ReplyListener
from streamproc.protocol.topics import Topics
from streamproc.protocol.records import Record, RecordType
from streamproc.worker.handed_tasks import HandedTasks
from streamproc.worker.handed_task_thread import HandedTaskThread
from streamproc.worker.task_turns import TaskTurns
from streamproc.worker.sticky_cache import StickyCache
from streamproc.worker.workflow_activation import WorkflowTaskHandler
from streamproc.worker.workflow_worker import WorkflowWorker
from streamproc.worker import eager_activities, handed_tasks
from streamproc.worker.eager_activities import EagerActivities
from tests.worker.test_eager_activities import Activities, Replies
from tests.worker.test_workflow_task_handler import COMPLETE, SCHEDULE, Definition, FakeInstance, Outcome, task
from tests.support.workflow_tasks import first_task_history, task_records


def workflow_task(key=9):
    return Record(RecordType.EVENT, "WORKFLOW", "WORKFLOW_TASK", {}, key=key)


def processed():
    return Record(RecordType.EVENT, "WORKFLOW", "TASK_PROCESSED", {}, key=9)


def handler(handed, *answers):
    h = WorkflowTaskHandler({"Order": Definition("Order", list(answers))}, "worker-1", FakeInstance, StickyCache(10))
    h.handed = handed
    return h


def test_an_answer_that_leaves_the_run_open_asks_for_the_next_task_and_a_closing_one_does_not():
    replies = Replies()
    asking = handler(HandedTasks(replies), Outcome([SCHEDULE])).answer(task(first_task_history()))
    assert orjson.loads(asking.value["attributes"]) == {"return_new_workflow_task": True}
    assert asking.reply_partition == 3 and asking.request_id.startswith(tuple(replies.prefixes))
    closing = handler(HandedTasks(replies), Outcome([COMPLETE])).answer(task(first_task_history()))
    assert closing.value.get("attributes") is None and closing.reply_partition < 0


def test_no_ask_without_a_listener_or_with_the_path_off():
    for handed in (HandedTasks(None), None):
        answer = handler(handed, Outcome([SCHEDULE])).answer(task(first_task_history()))
        assert answer.value.get("attributes") is None and answer.reply_partition < 0


def test_a_handed_back_task_is_queued_for_the_polling_thread_and_ends_the_request():
    replies = Replies()
    handed = HandedTasks(replies)
    request_id, partition = handed.listen()
    assert partition == 3 and handed.expecting()
    threading.Timer(0.05, replies.answer, (request_id, workflow_task())).start()
    (got,) = handed.take(timeout_s=5)
    assert got.key == 9 and handed.received == 1 and request_id not in replies.waiting


def test_eager_replies_go_to_the_reservation_and_a_handed_back_task_ends_them():
    replies = Replies()
    seen = []
    request_id, _ = HandedTasks(replies).listen(lambda reply: seen.append(reply.record.intent) or False)
    replies.answer(request_id, Record(RecordType.EVENT, "ACTIVITY_TASK", "ACTIVITY_TASK", {}, key=1))
    assert request_id in replies.waiting  # the reservation said: more may come
    replies.answer(request_id, workflow_task())
    assert seen == ["ACTIVITY_TASK", "WORKFLOW_TASK"] and request_id not in replies.waiting

    request_id, _ = HandedTasks(replies).listen(lambda reply: True)
    replies.answer(request_id, processed())
    assert request_id not in replies.waiting


def test_an_activity_of_a_cached_run_asks_for_the_runs_next_task_after_the_one_cached():
    handed = HandedTasks(Replies(), cached_at={"run-1": 6}.get)
    value = {"attempt": 1}
    assert handed.ask_after_activity(value, "run-2") is None and value == {"attempt": 1}
    takes = handed.ask_after_activity(value, "run-1")
    assert value == {"attempt": 1, "return_workflow_task_after": 6} and handed.expecting()
    rejection = Record(RecordType.COMMAND_REJECTION, "ACTIVITY_TASK", "COMPLETE", {}, key=1,
                       rejection_type="INVALID_STATE", rejection_reason="over")
    assert takes(Reply(rejection, 0)) is False  # the attempt's own callback reads it
    assert takes(Reply(workflow_task(), 0)) is True and len(handed.take()) == 1


def test_the_cache_says_which_task_a_run_was_cached_at_and_nothing_while_it_runs():
    cache = StickyCache(10)
    first = task(first_task_history())
    assert cache.answered_event_id("run-1") == 0
    cache.keep(first, object())
    assert cache.answered_event_id("run-1") == first.scheduled_event_id
    cache.take(first, "worker-1")  # taken by the task that runs now
    assert cache.answered_event_id("run-1") == 0


def test_a_listener_shared_with_the_activity_part_is_used_once_it_runs():
    handed = HandedTasks(None)
    shared = []
    handed.replies_of = lambda: shared[0] if shared else None
    assert handed.listen() is None  # the activity part is not up yet: no ask
    shared.append(Replies())
    request_id, partition = handed.listen()
    assert partition == 3 and request_id.startswith(tuple(shared[0].prefixes))


def test_a_stopped_worker_asks_no_more_but_still_expects_what_it_asked_for_before():
    replies = Replies()
    handed = HandedTasks(replies, cached_at={"run-1": 6}.get)
    assert handed.listen() is not None and handed.expecting()
    handed.stop()
    assert handed.listen() is None  # its answers go without the ask: the next task through the queue
    value = {"attempt": 1}
    assert handed.ask_after_activity(value, "run-1") is None and value == {"attempt": 1}
    assert handed.expecting()  # the ask made before is still answered within its window


@workflow.defn
class _Idle:
    @workflow.run
    async def run(self) -> None:
        pass


def test_a_stopping_worker_runs_the_tasks_handed_back_for_what_it_asked_before_it_stopped():
    """Left unrun, such a task would wait for nobody until it timed out (a task on the queue
    goes to the group's next member at once)."""
    worker = WorkflowWorker("q", [_Idle], bootstrap="127.0.0.1:1")  # nothing here talks to a broker
    worker.handed.replies = Replies()
    request_id, _ = worker.handed.listen()  # the last answer before the stop asked
    ran = []
    worker._run = lambda task, scheduled_ms=None: ran.append(task.scheduled_event_id)
    (record,) = task_records(first_task_history())
    record.record_type = RecordType.EVENT  # as the engine replies with it
    failures = []
    thread = HandedTaskThread(worker.handed, TaskTurns(), worker._answer_handed, failures.append, "handed")
    thread.start()  # as `run` starts it
    threading.Timer(0.05, worker.handed.replies.answer, (request_id, record)).start()
    began = time.monotonic()
    stopping = threading.Thread(target=thread.stop, daemon=True)  # what `run` does when it leaves
    stopping.start()
    stopping.join(10)
    assert not stopping.is_alive() and ran == [2] and worker.handed.listen() is None and failures == []
    assert time.monotonic() - began < 5  # no longer than the window the ask opened


def test_an_answer_that_asks_for_eager_activities_too_hears_a_late_one_as_long_as_without_the_hand_back():
    """A started eager attempt that never reaches its worker waits out its start-to-close
    timeout: the answer's replies are heard for the eager path's time, not the hand-back's."""
    ttls = {}

    class Listener(Replies):
        def expect(self, request_id, callback, ttl_s):
            super().expect(request_id, callback, ttl_s)
            ttls[request_id] = ttl_s

    activities = Activities(slots=5)
    activities.replies = Listener()
    h = handler(HandedTasks(activities.replies), Outcome([{**SCHEDULE, "activity_type": "reserve"}]))
    h.eager = EagerActivities(activities)
    answer = h.answer(task(first_task_history()))
    assert orjson.loads(answer.value["commands"])[0].get("request_eager_execution") is True
    assert ttls[answer.request_id] >= eager_activities.LISTEN_S
    late = Record(RecordType.EVENT, "ACTIVITY_TASK", "ACTIVITY_TASK", {}, key=7)
    activities.replies.answer(answer.request_id, late)
    assert activities.ran == [(7, True)]


def test_a_task_handed_back_after_an_engine_outage_longer_than_any_ask_is_remembered_is_still_taken(monkeypatch):
    """An engine down for a restart or a takeover processes the answers sent meanwhile
    when it is back; the queue path delivers their next tasks then, however long it took.
    A task handed back then must be taken too: dropped, it would wait out its timeout and
    the run's history would show it timed out. (The real listener, fed by hand: no broker.)"""
    now = [1000.0]
    monkeypatch.setattr(replies_module.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(handed_tasks.time, "monotonic", lambda: now[0])
    listener = ReplyListener("127.0.0.1:1", Topics("t"))  # not started: nothing connects
    handed = HandedTasks(listener)
    request_id, _ = handed.listen()
    now[0] += 15 * 60  # the engine was away a quarter of an hour
    listener._purge_expired()
    task_record = workflow_task()
    task_record.request_id = request_id
    listener._dispatch(task_record, 0)
    assert len(handed.take()) == 1
    assert listener.waiting == 0  # answers that make no task leave nothing behind


def test_a_task_handed_back_late_with_an_activitys_completion_is_still_taken(monkeypatch):
    """The activity's answer is heard for 120 s (a refusal); its run's next task, however late."""
    now = [1000.0]
    monkeypatch.setattr(replies_module.time, "monotonic", lambda: now[0])
    listener = ReplyListener("127.0.0.1:1", Topics("t"))  # not started: nothing connects
    handed = HandedTasks(None, cached_at={"run-1": 6}.get)
    handed.replies_of = lambda: listener  # the activity part's listener, shared
    takes = handed.ask_after_activity({}, "run-1")
    request_id = handed.request_id()
    listener.expect(request_id, lambda reply: takes(reply) or True, 120)  # what the attempt registers
    now[0] += 15 * 60
    listener._purge_expired()
    task_record = workflow_task()
    task_record.request_id = request_id
    listener._dispatch(task_record, 0)
    assert len(handed.take()) == 1


def test_a_rejected_answer_drops_the_instance_it_left_in_the_cache():
    """A task redelivered after a rebalance, answered here too late (another worker's answer
    was kept): the instance kept for our answer holds commands the engine never took, so
    no later task (nor a task riding along, `ride_along`) may start from it."""
    replies = Replies()
    cache = StickyCache(10)
    handed = HandedTasks(replies, cache.answered_event_id, cache.forget_answer)
    h = WorkflowTaskHandler({"Order": Definition("Order", [Outcome([SCHEDULE])] * 2)}, "worker-1", FakeInstance,
                            cache)
    h.handed = handed
    answer = h.answer(task(first_task_history()))
    assert "run-1" in cache

    def rejected(scheduled_event_id):
        return Record(RecordType.COMMAND_REJECTION, "WORKFLOW", "TASK_COMPLETE",
                      {**answer.value, "scheduled_event_id": scheduled_event_id}, key=answer.key,
                      rejection_type="INVALID_STATE", rejection_reason="that task is over")
    replies.answer(answer.request_id, rejected(1))  # some other task's answer: not this instance's
    assert "run-1" in cache
    replies.answer(answer.request_id, rejected(answer.value["scheduled_event_id"]))
    assert "run-1" not in cache
