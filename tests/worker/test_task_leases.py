"""The rules that keep a task from being stranded, without a broker: a START is sent again
with its request id until answered, and an attempt past its deadline is overdue."""

from __future__ import annotations

import threading
from concurrent.futures import Future

from streamproc.protocol.records import Record, RecordType
from streamproc.kafka.replies import Reply
from streamproc.worker.task_leases import OverdueAttempts, confirm_start


class Replies:
    """A replies listener whose answer arrives after a given number of copies were sent."""

    def __init__(self, answer_after_copies: int | None) -> None:
        self.answer_after = answer_after_copies
        self.futures: dict[str, Future] = {}
        self.forgotten: list[str] = []

    def first_reply(self, request_id, ttl_s):
        return self.futures.setdefault(request_id, Future())

    def forget(self, request_id):
        self.forgotten.append(request_id)

    def sent(self, request_id, copies):
        if self.answer_after is not None and copies >= self.answer_after:
            self.futures[request_id].set_result(Reply(Record(RecordType.EVENT, "JOB", "STARTED", {}, key=1), 0))


def test_a_start_is_sent_again_with_the_same_request_id_until_the_engine_answers():
    replies, copies = Replies(answer_after_copies=3), []

    def send():
        copies.append("r-1")
        replies.sent("r-1", len(copies))

    reply = confirm_start(replies, "r-1", send, threading.Event(), resend_s=0.01)
    assert reply is not None and reply.record.intent == "STARTED"
    assert copies == ["r-1", "r-1", "r-1"]


def test_a_worker_stopping_before_an_answer_leaves_the_task_unsettled():
    replies, stop = Replies(answer_after_copies=None), threading.Event()
    copies = []

    def send():
        copies.append(1)
        if len(copies) == 2:
            stop.set()

    assert confirm_start(replies, "r-2", send, stop, resend_s=0.01) is None
    assert len(copies) == 2 and replies.forgotten == ["r-2"]


def test_an_attempt_is_overdue_from_its_start_sent_plus_its_timeout_and_a_heartbeat_extends_it():
    now = [100.0]
    attempts = OverdueAttempts(clock=lambda: now[0])
    job, activity, endless = object(), object(), object()
    attempts.begin(job, 3.0, "job 1 attempt 1", sent_at=99.0)       # due at 102
    attempts.begin(activity, 5.0, "activity a attempt 2")           # due at 105
    attempts.begin(endless, None, "no deadline")
    now[0] = 101.9
    assert attempts.overdue() == []
    now[0] = 102.0
    assert attempts.overdue() == ["job 1 attempt 1"]
    attempts.end(job)
    attempts.extend(activity, 110.0)                                 # a heartbeat
    now[0] = 109.0
    assert attempts.overdue() == []
    now[0] = 1_000_000.0
    assert attempts.overdue() == ["activity a attempt 2"]
    attempts.end(activity)
    assert attempts.overdue() == []


class Consumer:
    def __init__(self) -> None:
        self.subscriptions = 0
        self.unsubscriptions = 0
        #: What the group gave this member (any non-empty list stands for partitions).
        self.assigned = [0]

    def assignment(self) -> list:
        return self.assigned

    def subscribe(self) -> None:
        self.subscriptions += 1

    def unsubscribe(self) -> None:
        self.unsubscriptions += 1


def membership(others: list, now: list):
    from streamproc.worker.task_queue_membership import TaskQueueMembership

    attempts = OverdueAttempts(clock=lambda: now[0])
    consumer = Consumer()
    member = TaskQueueMembership({}, attempts, lambda c: c.subscribe(), lambda c: others[0], "q", "w-1",
                                 check_interval_s=5, clock=lambda: now[0], make_consumer=lambda config: consumer,
                                 unsettled_rejoin_s=10)
    member.join()
    return member, attempts, consumer


def test_a_worker_with_an_overdue_attempt_leaves_the_group_when_another_member_can_take_over():
    now, others = [0.0], [1]
    member, attempts, consumer = membership(others, now)
    hung = object()
    attempts.begin(hung, 4.0, "job 7 attempt 1", sent_at=0.0)
    now[0] = 3.9
    assert member.may_take_tasks() and consumer.unsubscriptions == 0
    now[0] = 4.0
    assert not member.may_take_tasks() and consumer.unsubscriptions == 1
    now[0] = 100.0
    assert not member.may_take_tasks() and consumer.subscriptions == 1  # still stuck: stays out
    attempts.end(hung)  # the handler returned at last
    assert member.may_take_tasks() and consumer.subscriptions == 2


def test_a_lone_worker_stays_and_one_left_alone_rejoins():
    now, others = [0.0], [0]
    member, attempts, consumer = membership(others, now)
    attempts.begin(object(), 1.0, "activity a attempt 1", sent_at=0.0)
    now[0] = 2.0
    assert member.may_take_tasks() and consumer.unsubscriptions == 0  # nobody to hand over to
    others[0] = 1
    now[0] = 4.0
    assert member.may_take_tasks()  # checked again only every 5 s
    now[0] = 7.0
    assert not member.may_take_tasks() and consumer.unsubscriptions == 1
    others[0] = 0  # the other member left too: the partitions would have no owner
    now[0] = 12.0
    assert member.may_take_tasks() and consumer.subscriptions == 2
    others[0] = None  # the broker is away: stay as we are
    now[0] = 20.0
    assert member.may_take_tasks() and consumer.unsubscriptions == 1


class Listener:
    """The replies listener's registration side; `answer` plays the engine's reply."""

    def __init__(self) -> None:
        self.callbacks = {}

    def expect(self, request_id, callback, ttl_s):
        self.callbacks[request_id] = callback

    def answer(self, request_id, intent="STARTED"):
        self.callbacks[request_id](Reply(Record(RecordType.EVENT, "JOB", intent, {}, key=1), 0))


def test_pending_starts_resend_unanswered_ones_and_take_only_the_first_answer():
    from streamproc.worker.task_leases import PendingStarts

    now, sent, answers = [0.0], [], []
    listener = Listener()
    starts = PendingStarts(listener, sent.append, resend_s=5, clock=lambda: now[0])
    a = Record.command("JOB", "START", {"attempt": 1}, key=1, request_id="a", reply_partition=0)
    b = Record.command("JOB", "START", {"attempt": 1}, key=2, request_id="b", reply_partition=0)
    starts.start(a, answers.append)
    now[0] = 3.0
    starts.start(b, answers.append)
    assert [c.request_id for c in sent] == ["a", "b"] and len(starts) == 2
    now[0] = 5.0
    starts.resend_due()  # a is 5 s old, b 2 s: only a again, same request id
    assert [c.request_id for c in sent] == ["a", "b", "a"]
    listener.answer("b")
    listener.answer("a")
    listener.answer("a", intent="REJECTED")  # the copy's answer: ignored
    assert len(answers) == 2 and len(starts) == 0
    now[0] = 100.0
    starts.resend_due()
    assert len(sent) == 3


def test_a_member_out_of_its_group_subscribes_again_then_renews_its_consumer():
    """A consumer that did not get back into its group after broker restarts polls on with no
    partition: after 10 s out of the group the worker subscribes again, 10 s later it makes a
    new consumer. Settled in the group (its statistics say so), a member with no partition
    is left alone."""
    now, others = [0.0], [1]
    member, attempts, consumer = membership(others, now)
    assert member.may_take_tasks() and consumer.subscriptions == 1
    consumer.assigned = []
    member.standing.on_stats('{"cgrp": {"state": "up", "join_state": "wait-join"}}')
    for t in (1.0, 5.0, 10.9):
        now[0] = t
        assert member.may_take_tasks() and consumer.unsubscriptions == 0
    now[0] = 11.0
    assert member.may_take_tasks() and (consumer.unsubscriptions, consumer.subscriptions) == (1, 2)
    assert member.consumers_made == 1
    now[0] = 21.0
    assert member.may_take_tasks() and consumer.subscriptions == 3 and member.consumers_made == 2
    member.standing.on_stats('{"cgrp": {"state": "up", "join_state": "steady"}}')  # settled, no partition
    now[0] = 500.0
    assert member.may_take_tasks() and consumer.subscriptions == 3 and member.consumers_made == 2
