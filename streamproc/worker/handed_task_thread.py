"""The workflow worker's thread for the tasks the engine hands back to it (`handed_tasks`).

A workflow worker takes tasks from two sources: the task queue, and the tasks handed back
on its replies partition. Each has a thread that blocks on it alone, so that a task from
either is taken the moment it arrives and a worker waiting for one source does not wake
for the other. The thread of `WorkflowWorker.run` owns the queue's consumer and blocks in
its poll: librdkafka has no way for another thread to wake a poll (confluent-kafka
exposes no queue IO events nor a wakeup), so one thread cannot wait on both. This thread
blocks in `HandedTasks.wait_for_tasks`, with no timeout: the replies listener that puts a
task there wakes it. The two run what they took in turns (`task_turns`).

Everything about the consumer stays on the thread that owns it: its polls (the group's
liveness and `max.poll.interval.ms`), rebalance callbacks, commits and seeks. It polls
again only once its batch is answered, so it takes from the queue no more than before,
and a handed-back task runs between two of its batches, as when one thread took both.
(The one thread used to alternate non-blocking polls of the queue with 2 ms waits for a
handed-back task while it expected one: ~300 wakeups a second, and a task from either
source could wait out the other's slice.)
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from streamproc.protocol.records import Record
from streamproc.worker.handed_tasks import HandedTasks
from streamproc.worker.task_turns import TaskTurns

__all__ = ["HandedTaskThread"]


class HandedTaskThread:
    """Runs `answer` on each lot of handed-back tasks, in its turn, until `stop`."""

    def __init__(self, handed: HandedTasks, turns: TaskTurns, answer: Callable[[list[Record]], None],
                 on_failure: Callable[[Exception], None], name: str) -> None:
        self.handed = handed
        self._turns = turns
        self._answer = answer
        self._on_failure = on_failure
        #: Why the thread ended before `stop` (None: it did not).
        self.failure: Exception | None = None
        self._thread = threading.Thread(target=self.run, name=name, daemon=True)

    def start(self) -> HandedTaskThread:
        self._thread.start()
        return self

    def run(self) -> None:
        """Blocks until tasks come, answers them in its turn; once the worker stops asking
        (`stop`), answers those handed back for what it asked before, within the window they
        are expected in (left, they would wait for nobody until they timed out), and ends."""
        try:
            while (records := self.handed.wait_for_tasks()) is not None:
                with self._turns:
                    try:
                        self._answer(records)
                    finally:  # in the turn: a completion that gets it next sees the runs free
                        self.handed.answered(records)
        except Exception as exc:  # the worker cannot go on without it: it is told, and stops
            self.failure = exc
            self.handed.stop()  # at once: a task asked back from now on would wait for nobody
            self._on_failure(exc)

    def stop(self) -> None:
        """Ask no more tasks back, and wait while the thread answers those asked for already."""
        self.handed.stop()
        if self._thread.is_alive():
            self._thread.join()
