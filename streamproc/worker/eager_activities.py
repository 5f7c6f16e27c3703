"""Eager activity execution: the worker that completes a workflow task runs the activities
the task schedules itself, without a trip through the task queue.

As Temporal's workers do (`request_eager_execution` on ScheduleActivityTask): when
workflow code schedules an activity on the worker's own task queue that this process's
`ActivityWorker` runs, the worker holds a free activity slot for it and marks the command.
The engine starts that attempt for this worker when it schedules it, and sends the task
back as a reply to the TASK_COMPLETE, followed by TASK_PROCESSED. That spares the task
queue hop and the START round trip: one engine transaction of the five a one-activity
workflow needs. Slots the engine did not fill are given back at TASK_PROCESSED, or at a
rejection of the answer. An eager attempt whose worker dies is a started attempt like any
other: it times out start-to-close and is retried through the task queue.

A reply that comes late (the engine was down) still runs its attempt, in a slot taken
then: the slots held for it were given back after `HOLD_SLOTS_S`, so a worker waiting on
an engine that is down keeps its slots for the task queue meanwhile.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

import structlog

from streamproc.protocol.records import ActivityIntent, RecordType, ValueType
from streamproc.kafka.replies import Reply
from streamproc.protocol.workflow_commands import WorkflowCommandType

if TYPE_CHECKING:
    from streamproc.worker.activity_worker import ActivityWorker

__all__ = ["EagerActivities", "MAX_EAGER_PER_TASK"]

log = structlog.get_logger("streamproc.worker")

#: Activities one workflow task may ask to run eagerly (Temporal's SDKs ask for at most 3).
MAX_EAGER_PER_TASK = 3
#: How long slots stay held for a TASK_COMPLETE the engine has not answered.
HOLD_SLOTS_S = 10.0
#: How long a late eager task is still run when it comes (its attempt has long timed out after that).
LISTEN_S = 600.0


class _Reservation:
    """The slots held for one TASK_COMPLETE, and what its replies do with them."""

    def __init__(self, activities: ActivityWorker, held: int, expires: float) -> None:
        self.activities = activities
        self.held = held
        self.expires = expires
        self._lock = threading.Lock()

    def on_reply(self, reply: Reply) -> bool:
        record = reply.record
        if record.value_type == ValueType.ACTIVITY_TASK and record.intent == ActivityIntent.ACTIVITY_TASK \
                and record.record_type is RecordType.EVENT:
            self.activities.run_reserved(record, slot_held=self._take_one())
            return False
        self.release()  # TASK_PROCESSED or a rejection: nothing more comes
        return True

    def _take_one(self) -> bool:
        with self._lock:
            if self.held == 0:
                return False
            self.held -= 1
            return True

    def release(self) -> None:
        with self._lock:
            held, self.held = self.held, 0
        for _ in range(held):
            self.activities.release_slot()


class EagerActivities:
    """Marks a workflow worker's answers for eager execution by `activities` (same queue).
    The worker gives back overdue slots between its batches (`release_overdue`)."""

    def __init__(self, activities: ActivityWorker) -> None:
        self.activities = activities
        self._held: deque[_Reservation] = deque()

    def ask(self, commands: list[dict]) -> tuple[list[dict], tuple[str, int] | None]:
        """`commands` (of a TASK_COMPLETE) asking to run eagerly the activities this worker
        holds a slot for, and the (request id, reply partition) the answer must carry to
        hear the engine (on the activity worker's replies); the commands unchanged and
        None if there are none."""
        replies = self.activities.replies
        if replies is None:
            return commands, None
        marked, reservation = self.reserve(commands)
        if reservation is None:
            return commands, None
        return marked, self.listen(reservation)

    def listen(self, reservation: _Reservation) -> tuple[str, int]:
        """The (request id, reply partition) whose replies go to `reservation`, on the
        activity worker's replies."""
        replies = self.activities.replies
        request_id = uuid.uuid4().hex
        replies.expect(request_id, reservation.on_reply, LISTEN_S)
        return request_id, replies.partition

    def reserve(self, commands: list[dict],
                handed_slot: Callable[[], bool] | None = None) -> tuple[list[dict], _Reservation | None]:
        """`commands` asking to run eagerly the activities this worker holds a slot for, and
        the reservation whose `on_reply` must hear the answer's replies (None: none asked).
        `handed_slot`: gives the reservation a slot held already (an activity that is done
        and answers now, with the run's next task riding along: its slot goes on to the
        run's next activity); True once it did."""
        if self.activities.replies is None:  # the activity worker is not up yet
            return commands, None
        held = 0
        marked = []
        for command in commands:
            if (held < MAX_EAGER_PER_TASK and command.get("type") == WorkflowCommandType.SCHEDULE_ACTIVITY_TASK
                    and command.get("task_queue") in (None, "", self.activities.task_queue)
                    and command.get("activity_type") in self.activities.definitions
                    and ((handed_slot is not None and handed_slot()) or self.activities.reserve_slot())):
                command = {**command, "request_eager_execution": True}  # the instance's own stays as it is
                held += 1
            marked.append(command)
        if held == 0:
            return commands, None
        reservation = _Reservation(self.activities, held, time.monotonic() + HOLD_SLOTS_S)
        self._held.append(reservation)
        return marked, reservation

    def release_overdue(self) -> None:
        """Give back the slots of answers the engine has not answered in `HOLD_SLOTS_S`."""
        now = time.monotonic()
        while self._held and (self._held[0].expires <= now or self._held[0].held == 0):
            self._held.popleft().release()

    def release_all(self) -> None:
        while self._held:
            self._held.popleft().release()
