"""The worker side of eager activity execution: which commands ask for it, and slots held,
used and given back (the Kafka side is in tests/kafka/test_workflows_e2e.py)."""

from __future__ import annotations

from typing import NamedTuple

import pytest

from streamproc.protocol.records import Record, RecordType
from streamproc.worker import eager_activities
from streamproc.worker.eager_activities import EagerActivities
from streamproc.kafka.replies import Reply


class Replies:
    partition = 3

    def __init__(self) -> None:
        self.waiting = {}
        self.prefixes = {}

    def expect(self, request_id, callback, ttl_s):
        self.waiting[request_id] = callback

    def expect_prefix(self, prefix, callback):
        self.prefixes[prefix] = callback

    def answer(self, request_id, record):
        if request_id not in self.waiting:  # as the listener does: a prefix's, else nobody's
            for prefix, callback in self.prefixes.items():
                if request_id.startswith(prefix):
                    callback(Reply(record, 0))
            return
        if self.waiting[request_id](Reply(record, 0)):
            del self.waiting[request_id]


class Activities:
    """What EagerActivities uses of an ActivityWorker: slots, definitions, its replies."""

    task_queue = "orders"
    definitions = {"reserve": None, "charge": None}

    def __init__(self, slots: int) -> None:
        self.free = slots
        self.replies = Replies()
        self.ran: list[tuple[int, bool]] = []

    def reserve_slot(self) -> bool:
        if self.free == 0:
            return False
        self.free -= 1
        return True

    def release_slot(self) -> None:
        self.free += 1

    def run_reserved(self, task, slot_held=True):
        self.ran.append((task.key, slot_held))


def schedule(activity_id, activity_type="reserve", task_queue=""):
    return {"type": "SCHEDULE_ACTIVITY_TASK", "activity_id": activity_id, "activity_type": activity_type,
            "task_queue": task_queue}


class Sent(NamedTuple):
    """What a TASK_COMPLETE carries after `EagerActivities.ask`."""

    given: list
    commands: list
    request_id: str | None
    reply_partition: int


def ask(eager, *commands):
    given = list(commands)
    marked, request = eager.ask(given)
    request_id, reply_partition = request or (None, -1)
    return Sent(given, marked, request_id, reply_partition)


def asked(sent):
    return [c["activity_id"] for c in sent.commands if c.get("request_eager_execution")]


def activity_task(key):
    return Record(RecordType.EVENT, "ACTIVITY_TASK", "ACTIVITY_TASK", {}, key=key)


def processed():
    return Record(RecordType.EVENT, "WORKFLOW", "TASK_PROCESSED", {}, key=9)


def test_only_registered_activities_of_this_queue_are_asked_for_at_most_three_per_task():
    activities = Activities(slots=10)
    sent = ask(EagerActivities(activities),
               schedule("1"), schedule("2", "unknown"), schedule("3", task_queue="billing"), schedule("4", "charge"),
               schedule("5", task_queue="orders"), schedule("6"), {"type": "START_TIMER", "timer_id": "t"})
    assert asked(sent) == ["1", "4", "5"]
    assert activities.free == 7
    assert sent.reply_partition == 3 and sent.request_id in activities.replies.waiting


def test_no_free_slot_no_request_and_the_answer_is_left_as_it_was():
    activities = Activities(slots=1)
    sent = ask(EagerActivities(activities), schedule("1"), schedule("2"))
    assert asked(sent) == ["1"]
    unchanged = ask(EagerActivities(activities), schedule("3"))
    assert unchanged.commands is unchanged.given and unchanged.reply_partition == -1


def test_tasks_the_engine_sends_run_in_the_held_slots_and_the_rest_are_given_back():
    activities = Activities(slots=5)
    sent = ask(EagerActivities(activities), schedule("1"), schedule("2"))
    assert activities.free == 3
    activities.replies.answer(sent.request_id, activity_task(101))
    activities.replies.answer(sent.request_id, processed())
    assert activities.ran == [(101, True)]
    assert activities.free == 4  # the slot of "2", which the engine did not start here, is back
    assert sent.request_id not in activities.replies.waiting


def test_a_rejected_answer_gives_every_slot_back():
    activities = Activities(slots=5)
    sent = ask(EagerActivities(activities), schedule("1"), schedule("2"))
    rejection = Record(RecordType.COMMAND_REJECTION, "WORKFLOW", "TASK_COMPLETE", {}, key=9,
                       rejection_type="INVALID_STATE", rejection_reason="that task is over")
    activities.replies.answer(sent.request_id, rejection)
    assert activities.free == 5 and activities.ran == []


def test_slots_of_an_unanswered_task_are_given_back_and_a_late_task_still_runs(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(eager_activities.time, "monotonic", lambda: now[0])
    activities = Activities(slots=5)
    eager = EagerActivities(activities)
    sent = ask(eager, schedule("1"))
    now[0] += eager_activities.HOLD_SLOTS_S - 0.1
    eager.release_overdue()
    assert activities.free == 4
    now[0] += 0.2
    eager.release_overdue()
    assert activities.free == 5
    activities.replies.answer(sent.request_id, activity_task(7))  # the engine was slow, not gone
    assert activities.ran == [(7, False)]


@pytest.mark.parametrize("commands", [[], [{"type": "COMPLETE_WORKFLOW_EXECUTION", "result": "1"}]])
def test_answers_without_activities_are_not_touched(commands):
    activities = Activities(slots=5)
    sent = ask(EagerActivities(activities), *commands)
    assert sent.commands is sent.given and sent.request_id is None and activities.free == 5
