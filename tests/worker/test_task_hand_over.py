"""A task left unstarted for another member (an attempt was overdue, the worker meant to
leave the group) is offered to the worker again when it stays: the consumer has read past
it, so nothing else would ever start it (found stranded, dispatched and never started, in
the takeover and crash tests on a loaded machine)."""

from __future__ import annotations

from confluent_kafka import TopicPartition

from streamproc.protocol.records import Record, ValueType
from streamproc.worker.task_intake import TaskIntake
from streamproc.worker.task_offsets import TaskOffsets


class _Consumer:
    """Only what the offer reads: the assignment."""

    def __init__(self, partitions: set[int]) -> None:
        self.partitions = partitions

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition("tasks", p) for p in sorted(self.partitions)]


class _Membership:
    def __init__(self) -> None:
        self.leaving = True

    def hands_over(self) -> bool:
        return self.leaving


def _intake() -> tuple[TaskIntake, TaskOffsets, _Membership]:
    offsets = TaskOffsets()
    intake = TaskIntake("tasks", offsets, lambda task: True, "activity")
    intake.membership = _Membership()
    return intake, offsets, intake.membership


def _task(key: int) -> Record:
    return Record.command(ValueType.ACTIVITY_TASK, "ACTIVITY_TASK", {}, key=key)


def test_a_handed_over_task_is_taken_again_once_the_worker_stays():
    intake, offsets, membership = _intake()
    offsets.taken(0, 7)
    intake.hand_over(_task(1), 0, 7)
    taken: list = []
    intake._offer_handed_over(_Consumer({0}), lambda t, p, o: taken.append((t.key, p, o)))
    assert taken == [], "still leaving: kept for the next owner"
    membership.leaving = False
    intake._offer_handed_over(_Consumer({0}), lambda t, p, o: taken.append((t.key, p, o)))
    assert taken == [(1, 0, 7)]
    intake._offer_handed_over(_Consumer({0}), lambda t, p, o: taken.append((t.key, p, o)))
    assert taken == [(1, 0, 7)], "offered once"
    assert offsets.committable() == {0: 7}, "unsettled until its START is answered"


def test_a_handed_over_task_of_a_revoked_partition_is_left_to_its_next_owner():
    intake, offsets, membership = _intake()
    offsets.taken(0, 7)
    offsets.taken(1, 3)
    intake.hand_over(_task(1), 0, 7)
    intake.hand_over(_task(2), 1, 3)
    offsets.forget({1})  # revoked meanwhile: redelivered from the committed offset elsewhere
    membership.leaving = False
    taken: list = []
    intake._offer_handed_over(_Consumer({0, 1}), lambda t, p, o: taken.append((t.key, p, o)))
    assert taken == [(1, 0, 7)]
    intake.hand_over(_task(3), 0, 8)
    offsets.taken(0, 8)
    intake._offer_handed_over(_Consumer({1}), lambda t, p, o: taken.append((t.key, p, o)))
    assert taken == [(1, 0, 7)], "partition 0 is no longer ours"
