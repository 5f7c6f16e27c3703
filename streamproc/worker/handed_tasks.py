"""Workflow tasks the engine hands straight back to this worker, on its replies partition.

A worker that answers a workflow task, or completes an activity of a run it has cached
(usually one it ran eagerly), asks for the run's next workflow task (Temporal's
`return_new_workflow_task`). When the answer makes a new task, the engine sends that task
as a reply to the command (on the replies partition it names) instead of writing it to
`workflow-tasks.<queue>`: the worker runs it from its sticky cache, with no trip through
the task queue and its consumer group. The engine keeps the right to refuse (the task is
too large for one record, the worker's cache is behind the run) and then writes the task
to the queue as usual. A handed-back task is a dispatched task like any other: if this
worker dies with it, it times out on the engine and the next attempt goes through the
queue.

Replies arrive on the listener's thread, which puts them here and wakes the worker's
thread for handed-back tasks, blocked in `wait_for_tasks` with no timeout: a task handed
back is run at once, and a worker that expects none does not wake for it (the task queue
has a thread of its own, `workflow_worker`). A worker that stops asks no more (`stop`),
and runs the tasks handed back for what it asked before it leaves (within `EXPECT_S` of
its last ask): left, they would wait for nobody until their timeout, where a task on the
queue goes to the group's next member at once.
"""

from __future__ import annotations

import collections
import itertools
import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from streamproc.kafka.replies import Reply, ReplyListener
from streamproc.protocol.records import Record, RecordType, ValueType, WorkflowIntent

if TYPE_CHECKING:
    from streamproc.worker.ride_along import RideAlong

__all__ = ["HandedTasks", "is_handed_task"]

#: How long after an ask its task is still looked for by a worker that stops.
EXPECT_S = 1.0
#: How long an answer that asks for eager activities too is heard for them. An ask alone
#: is not registered: the engine writes nothing back when the answer makes no new task (no
#: record per answer for nothing), so each would only be forgotten by a time limit, and a
#: task handed back later (an engine away for a restart) would be dropped and time out.
#: Its request id starts with this worker's prefix instead, heard as long as it runs.
LISTEN_S = 10.0


def is_handed_task(record: Record) -> bool:
    return (record.value_type == ValueType.WORKFLOW and record.intent == WorkflowIntent.WORKFLOW_TASK
            and record.record_type is RecordType.EVENT)


class HandedTasks:
    """The asks of one workflow worker and the tasks handed back to it."""

    def __init__(self, replies: ReplyListener | None, cached_at: Callable[[str], int] = lambda run_id: 0,
                 forget_answer: Callable[[str, int], None] = lambda run_id, scheduled_event_id: None) -> None:
        #: Where the TASK_COMPLETEs that ask are answered (None: not listening yet).
        self.replies = replies
        #: Or the listener of another part of the process (an ActivityWorker's, once it
        #: runs), shared rather than a second consumer reading a replies partition.
        self.replies_of: Callable[[], ReplyListener | None] | None = None
        #: The task a run's cached instance answered last (its scheduled event id; 0: none).
        self.cached_at = cached_at
        #: Drops a run's cached instance if it is the one that answered the task scheduled at
        #: the event id given: the engine rejected that answer (`_heard`).
        self.forget_answer = forget_answer
        self._tasks: list[Record] = []
        #: Run ids of the tasks taken by the worker's thread (`wait_for_tasks`) and not yet
        #: answered (`answered`), with how many of each: a run's next task must not run ahead.
        self._taken: collections.Counter[str] = collections.Counter()
        self._cond = threading.Condition()
        self._expect_until = 0.0
        #: Set when the worker stops taking tasks: no answer asks for one any more.
        self._stopped = False
        #: Tasks handed back so far.
        self.received = 0
        #: The request ids of this worker's asks start with it (`ReplyListener.expect_prefix`).
        self._prefix = f"handed-{uuid.uuid4().hex[:16]}-"
        #: What follows the prefix: unique under it (the prefix is this worker's alone).
        self._asks = itertools.count(1)
        #: The listener the prefix is registered with.
        self._heard_on: ReplyListener | None = None
        #: Answers the run's next task with an activity's completion (`ride_along`; None: off).
        self.ride_along: RideAlong | None = None

    def listen(self, then: Callable[[Reply], bool | None] | None = None,
               ttl_s: float = LISTEN_S) -> tuple[str, int] | None:
        """A request id and replies partition for an answer that asks for the next task, or
        None when there is no listener. `then` gets the answer's other replies (eager
        activity tasks, TASK_PROCESSED, a rejection) and says when they are over; a handed
        task ends them too (the engine writes it last). `ttl_s`: how long the request is
        heard (longer for `then`'s replies: a late eager activity task still runs)."""
        replies = self.replies if self.replies is not None else self.replies_of() if self.replies_of else None
        if replies is None or not self._ask():
            return None
        request_id = self._request_id_on(replies)
        if then is None:  # heard by the prefix, however late: nothing to forget
            return request_id, replies.partition

        def on_reply(reply: Reply) -> bool:
            if is_handed_task(reply.record):
                self.put(reply.record)
                then(reply)  # the last reply: slots not filled are given back
                return True
            self._heard(reply.record)
            return bool(then(reply))

        replies.expect(request_id, on_reply, ttl_s)
        return request_id, replies.partition

    def request_id(self) -> str | None:
        """A request id for an activity's answer that asked (`ask_after_activity`): its
        task is heard by this worker's prefix too, however late (None: no listener)."""
        replies = self.replies if self.replies is not None else self.replies_of() if self.replies_of else None
        return None if replies is None else self._request_id_on(replies)

    def _request_id_on(self, replies: ReplyListener) -> str:
        if replies is not self._heard_on:
            replies.expect_prefix(self._prefix, self._on_late_reply)
            self._heard_on = replies
        return f"{self._prefix}{next(self._asks)}"

    def _on_late_reply(self, reply: Reply) -> None:
        """A reply to an ask no registration waits for: its task, if it is one (a refusal
        of the answer needs nothing from this worker)."""
        self._heard(reply.record)
        if is_handed_task(reply.record):
            self.put(reply.record)
        elif self.ride_along is not None and reply.record.intent == WorkflowIntent.RODE_ALONG:
            self.ride_along.settle(reply.record)  # heard after its registration lapsed

    def _heard(self, record: Record) -> None:
        """A rejected TASK_COMPLETE (the task is over: another worker's answer to it, after a
        rebalance redelivered it, was kept): the instance kept for it holds commands the
        engine never took, so it must answer nothing more, ride-along least of all."""
        if record.record_type is RecordType.COMMAND_REJECTION and record.value_type == ValueType.WORKFLOW \
                and record.intent == WorkflowIntent.TASK_COMPLETE:
            scheduled_event_id = record.value.get("scheduled_event_id")
            if isinstance(scheduled_event_id, int):
                self.forget_answer(record.value.get("run_id") or "", scheduled_event_id)

    def ask_after_activity(self, value: dict, run_id: str) -> Callable[[Reply], bool | None] | None:
        """For an activity's answer (COMPLETE, FAIL) of run `run_id`: when the run is cached
        here, ask in `value` for its next task, and return what hears a handed-back task
        among the answer's replies (None: not asked)."""
        after = self.cached_at(run_id) if run_id else 0
        if not after or not self._ask():
            return None
        value["return_workflow_task_after"] = after

        def on_reply(reply: Reply) -> bool:
            if is_handed_task(reply.record):
                self.put(reply.record)
                return True
            return False
        return on_reply

    def _ask(self) -> bool:
        """Whether an answer may ask now (the worker still takes tasks); if so, a task may
        come back soon: a worker that stops waits for it that long."""
        with self._cond:  # after `stop`, no window opens that its worker would not drain
            if self._stopped:
                return False
            self._expect_until = time.monotonic() + EXPECT_S
            return True

    @property
    def stopped(self) -> bool:
        """Whether the worker stopped taking tasks (`stop`)."""
        with self._cond:
            return self._stopped

    def expecting(self) -> bool:
        return time.monotonic() < self._expect_until

    def stop(self) -> None:
        """The worker takes no more tasks: no answer asks for one from now on. A task handed
        back to it then would wait for nobody until it timed out, where through the queue
        the group's next member runs it at once. What was asked before still comes back
        within the window (`expecting`): its worker runs it before it leaves."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()  # `wait_for_tasks` now waits only out the window

    def wait_quiet(self, timeout_s: float) -> None:
        """Wait (at most `timeout_s`) until no task is expected any more: the replies
        listener that hears them must stay open until then."""
        deadline = time.monotonic() + timeout_s
        while (left := min(self._expect_until, deadline) - time.monotonic()) > 0:
            time.sleep(left)

    def put(self, record: Record) -> None:
        """A task the engine handed back (from the listener's thread)."""
        with self._cond:
            self._tasks.append(record)
            self.received += 1
            self._cond.notify_all()

    def holds_task_for(self, run_id: str) -> bool:
        """Whether a task of run `run_id` was handed back and waits to run here (taken by
        the worker's thread too, until it is answered)."""
        with self._cond:
            return self._taken[run_id] > 0 or any(record.value.get("run_id") == run_id for record in self._tasks)

    def answered(self, records: list[Record]) -> None:
        """The tasks `wait_for_tasks` gave were run (or failed): their runs hold none any more."""
        with self._cond:
            self._taken.subtract(record.value.get("run_id") or "" for record in records)
            self._taken = +self._taken  # (drops the runs at zero)

    def wait_for_tasks(self) -> list[Record] | None:
        """The tasks handed back, waiting as long as it takes for the first; None once the
        worker stopped (`stop`) and the window of its last ask has passed with none left.
        Their runs hold a task (`holds_task_for`) until the caller says `answered`."""
        with self._cond:
            while not self._tasks:
                if not self._stopped:
                    self._cond.wait()  # woken by `put` or `stop`, never by a clock
                elif (left := self._expect_until - time.monotonic()) > 0:
                    self._cond.wait(left)  # no ask opens a window after `stop`: it only closes
                else:
                    return None
            tasks, self._tasks = self._tasks, []
            self._taken.update(record.value.get("run_id") or "" for record in tasks)  # until `answered`
            return tasks

    def take(self, timeout_s: float = 0.0) -> list[Record]:
        """The tasks handed back so far, waiting up to `timeout_s` for the first."""
        with self._cond:
            if not self._tasks and timeout_s > 0:
                self._cond.wait(timeout_s)
            tasks, self._tasks = self._tasks, []
            return tasks
