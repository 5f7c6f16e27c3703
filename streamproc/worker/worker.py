"""One worker for a task queue's workflows and activities, as Temporal's ``Worker``::

    with Client() as client:
        Worker(client, task_queue="orders", workflows=[OrderWorkflow],
               activities=[reserve, charge]).run()          # until SIGINT / stop()

It runs a `WorkflowWorker` (workflow-tasks.<queue>) and an `ActivityWorker`
(tasks.<queue>) side by side, each in its own thread with its own consumer group; either
list may be empty, not both. With both, activities the workflows schedule on the queue
run here eagerly when a slot is free (Temporal's eager activity execution). In tests:
``with Worker(...) as worker: ...`` (or ``async with``) starts both and waits until both
got their partitions.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

from streamproc.client.client import Client
from streamproc.converter import DataConverter
from streamproc.metrics.worker_metrics import WorkerMetrics
from streamproc.worker.activity_worker import ActivityWorker
from streamproc.worker.eager_activities import EagerActivities
from streamproc.worker.workflow_worker import WorkflowWorker

__all__ = ["Worker"]


class Worker:
    def __init__(self, client: Client, *, task_queue: str, workflows: Iterable[type] = (),
                 activities: Iterable[Callable[..., Any]] = (), identity: str | None = None,
                 max_cached_workflows: int = 1000, max_concurrent_activities: int = 100,
                 graceful_shutdown_timeout: timedelta = timedelta(0),
                 data_converter: DataConverter | None = None,
                 disable_eager_activity_execution: bool = False, metrics: WorkerMetrics | None = None,
                 checkpoint_local_activities: bool = False) -> None:
        """`data_converter` defaults to the client's, as in Temporal. Activities that the
        workflows schedule on this queue run eagerly here when a slot is free (see
        `streamproc.worker.eager_activities`), unless `disable_eager_activity_execution`.
        `metrics`: where both parts report (Prometheus; None: nowhere).
        `checkpoint_local_activities`: see `WorkflowWorker`."""
        workflows, activities = list(workflows), list(activities)
        if not workflows and not activities:
            raise ValueError("a Worker needs at least one workflow or activity")
        where = {"bootstrap": client.bootstrap, "namespace": client.topics.namespace, "identity": identity,
                 "data_converter": data_converter or client.data_converter, "metrics": metrics}
        self.task_queue = task_queue
        self.workflow_worker = WorkflowWorker(task_queue, workflows, max_cached_workflows=max_cached_workflows,
                                              checkpoint_local_activities=checkpoint_local_activities,
                                              **where) if workflows else None
        self.activity_worker = ActivityWorker(task_queue, activities, max_concurrent=max_concurrent_activities,
                                              graceful_shutdown_timeout=graceful_shutdown_timeout,
                                              **where) if activities else None
        if self.workflow_worker and self.activity_worker and not disable_eager_activity_execution:
            self.workflow_worker.handler.eager = EagerActivities(self.activity_worker)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def is_ready(self) -> bool:
        """Whether every part has its task queue partitions (readiness)."""
        return all(part.ready.is_set() for part in self.parts)

    @property
    def parts(self) -> list[WorkflowWorker | ActivityWorker]:
        return [w for w in (self.workflow_worker, self.activity_worker) if w is not None]

    def run(self) -> None:
        """Run both until `stop()` or, from the main thread, SIGINT / SIGTERM."""
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, lambda *_: self.stop())
        threads = [threading.Thread(target=part.run, name=f"{type(part).__name__}-{self.task_queue}",
                                    daemon=True) for part in self.parts]
        for thread in threads:
            thread.start()
        try:
            # Wake now and then: a part that died (its topic never appeared...) ends the run.
            while not self._stop.wait(0.5) and all(t.is_alive() for t in threads):
                pass
        finally:
            for part in self.parts:
                part.stop()
            for thread in threads:
                thread.join(60)

    def start(self, ready_timeout: float = 60) -> Worker:
        """Run in a background thread; returns once every part has its partitions."""
        self._thread = threading.Thread(target=self.run, name=f"worker-{self.task_queue}", daemon=True)
        self._thread.start()
        for part in self.parts:
            if not part.ready.wait(ready_timeout):
                self.shutdown()
                raise TimeoutError(f"{type(part).__name__} on {self.task_queue!r} got no partitions "
                                   f"within {ready_timeout} s")
        return self

    def stop(self) -> None:
        """Ask `run()` to return; safe from a signal handler (it does not wait)."""
        self._stop.set()

    def shutdown(self, timeout: float = 60) -> None:
        """Stop and wait until both parts have left their groups."""
        self.stop()
        if self._thread is not None:
            self._thread.join(timeout)

    def __enter__(self) -> Worker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    async def __aenter__(self) -> Worker:
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.shutdown)
