"""One worker for a task queue's workflows and activities, as Temporal's ``Worker``::

    client = await Client.connect()
    async with Worker(client, task_queue="orders", workflows=[OrderWorkflow], activities=[reserve, charge],
                      activity_executor=ThreadPoolExecutor(16)):
        ...                                   # or: await worker.run() until worker.shutdown()

It runs a `WorkflowWorker` (workflow-tasks.<queue>) and an `ActivityWorker`
(tasks.<queue>) side by side, each in its own thread with its own consumer group; either
list may be empty, not both. With both, activities the workflows schedule on the queue
run here eagerly when a slot is free (Temporal's eager activity execution).

Its face follows the client's. On the asyncio `Client` it is Temporal's: `run()` and
`shutdown()` are coroutines, ``async def`` activities run on the caller's event loop, and
plain ``def`` activities need an `activity_executor` (a ``ThreadPoolExecutor``; without
one the constructor says so). On a `SyncClient` (``with Client() as client:``) it is the
blocking convenience: `run()` blocks (until SIGINT / SIGTERM / `stop()`), `shutdown()`
blocks, and plain activities run on the worker's own threads (`max_concurrent_activities`).
``with Worker(...)`` / ``async with Worker(...)`` start both parts and return once both
got their partitions; leaving the block shuts down, draining what runs.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import Executor
from datetime import timedelta
from typing import Any

from streamproc.activity.definition import ActivityDefinition
from streamproc.client.client import Client, SyncClient
from streamproc.client.temporal_gaps import WORKER_OPTIONS, refuse_options
from streamproc.converter import DataConverter
from streamproc.metrics.worker_metrics import WorkerMetrics
from streamproc.worker.activity_worker import ActivityWorker
from streamproc.worker.eager_activities import EagerActivities
from streamproc.worker.workflow_worker import WorkflowWorker
from streamproc.logs import ensure_logging_configured

__all__ = ["Worker"]


class Worker:
    def __init__(self, client: Client | SyncClient, *, task_queue: str, workflows: Iterable[type] = (),
                 activities: Iterable[Callable[..., Any]] = (), activity_executor: Executor | None = None,
                 identity: str | None = None, max_cached_workflows: int = 1000,
                 max_concurrent_activities: int = 100, max_concurrent_workflow_tasks: int | None = None,
                 graceful_shutdown_timeout: timedelta = timedelta(0),
                 data_converter: DataConverter | None = None,
                 disable_eager_activity_execution: bool = False, metrics: WorkerMetrics | None = None,
                 checkpoint_local_activities: bool = False, disable_workflow_task_hand_back: bool = False,
                 disable_workflow_task_ride_along: bool = False, **temporal_options: Any) -> None:
        """`data_converter` defaults to the client's, as in Temporal. Activities that the
        workflows schedule on this queue run eagerly here when a slot is free (see
        `streamproc.worker.eager_activities`), unless `disable_eager_activity_execution`.
        `activity_executor` runs plain ``def`` activities (required with the asyncio client,
        as in Temporal). `max_concurrent_workflow_tasks` is accepted (>= 1): this worker
        answers workflow tasks one at a time, which never exceeds it. `graceful_shutdown_timeout`:
        how long a shutdown lets running activities finish before cancelling them.
        `metrics`: where both parts report (Prometheus; None: nowhere).
        `checkpoint_local_activities`, `disable_workflow_task_hand_back`,
        `disable_workflow_task_ride_along`: see `WorkflowWorker`."""
        refuse_options("Worker", temporal_options, WORKER_OPTIONS)
        ensure_logging_configured()  # its lines to standard error, not into the program's output
        workflows, activities = list(workflows), list(activities)
        if not workflows and not activities:
            raise ValueError("a Worker needs at least one workflow or activity")
        if max_concurrent_workflow_tasks is not None and max_concurrent_workflow_tasks < 1:
            raise ValueError(f"max_concurrent_workflow_tasks must be >= 1, got {max_concurrent_workflow_tasks}")
        #: Temporal's face (coroutines, activities on the caller's loop) or the blocking one.
        self.is_async = not isinstance(client, SyncClient)
        if self.is_async and activity_executor is None:
            blocking = sorted(d.name for d in map(ActivityDefinition.of, activities) if not d.is_async)
            if blocking:
                raise ValueError(f"activities {blocking} are not async def: give the Worker an activity_executor "
                                 f"(e.g. concurrent.futures.ThreadPoolExecutor(max_workers=16)) to run them, "
                                 f"as in Temporal")
        where = {"bootstrap": client.bootstrap, "namespace": client.topics.namespace, "identity": identity,
                 "data_converter": data_converter or client.data_converter, "metrics": metrics}
        self.task_queue = task_queue
        self.workflow_worker = WorkflowWorker(task_queue, workflows, max_cached_workflows=max_cached_workflows,
                                              checkpoint_local_activities=checkpoint_local_activities,
                                              disable_workflow_task_hand_back=disable_workflow_task_hand_back,
                                              disable_workflow_task_ride_along=disable_workflow_task_ride_along,
                                              **where) if workflows else None
        self.activity_worker = ActivityWorker(task_queue, activities, max_concurrent=max_concurrent_activities,
                                              graceful_shutdown_timeout=graceful_shutdown_timeout,
                                              activity_executor=activity_executor,
                                              **where) if activities else None
        if self.workflow_worker and self.activity_worker and not disable_eager_activity_execution:
            self.workflow_worker.handler.eager = EagerActivities(self.activity_worker)
        if self.workflow_worker and self.activity_worker and self.workflow_worker.handed is not None:
            # An activity of a run cached here asks for the run's next task with its answer; the
            # workflow part hears its own answers on the activity part's replies listener.
            handed = self.activity_worker.workflow_tasks = self.workflow_worker.handed
            handed.replies_of = lambda: self.activity_worker.replies
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def is_ready(self) -> bool:
        """Whether every part has its task queue partitions (readiness)."""
        return all(part.ready.is_set() for part in self.parts)

    @property
    def parts(self) -> list[WorkflowWorker | ActivityWorker]:
        return [w for w in (self.workflow_worker, self.activity_worker) if w is not None]

    def run(self) -> Awaitable[None] | None:
        """Run both until `shutdown()`: a coroutine on the asyncio client (cancelling it
        shuts down too), blocking on a `SyncClient` (`run_sync`)."""
        return self._run_async() if self.is_async else self.run_sync()

    async def _run_async(self) -> None:
        async with self:
            # Wake now and then: a part that died (its topic never appeared...) ends the run.
            while not self._stop.is_set() and self._thread is not None and self._thread.is_alive():
                await asyncio.sleep(0.2)

    def run_sync(self) -> None:
        """Run both in this thread until `stop()` or, from the main thread, SIGINT / SIGTERM."""
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
        self._thread = threading.Thread(target=self.run_sync, name=f"worker-{self.task_queue}", daemon=True)
        self._thread.start()
        for part in self.parts:
            if not part.ready.wait(ready_timeout):
                self.shutdown_sync()
                raise TimeoutError(f"{type(part).__name__} on {self.task_queue!r} got no partitions "
                                   f"within {ready_timeout} s")
        return self

    def stop(self) -> None:
        """Ask `run()` to return; safe from a signal handler (it does not wait)."""
        self._stop.set()

    def shutdown(self) -> Awaitable[None] | None:
        """Stop taking tasks, let running activities finish (up to `graceful_shutdown_timeout`,
        then cancel them and wait for them to end), answer the workflow tasks at hand, and
        leave both groups: a coroutine on the asyncio client, blocking on a `SyncClient`."""
        return asyncio.to_thread(self.shutdown_sync) if self.is_async else self.shutdown_sync()

    def shutdown_sync(self, timeout: float | None = None) -> None:
        """`shutdown`, blocking this thread (at most `timeout` seconds more than the graceful time + 60 s)."""
        self.stop()
        if self._thread is not None:
            self._thread.join(timeout if timeout is not None else self.graceful_shutdown_s + 60)

    @property
    def graceful_shutdown_s(self) -> float:
        return self.activity_worker.graceful_shutdown_timeout.total_seconds() if self.activity_worker else 0.0

    def __enter__(self) -> Worker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown_sync()

    async def __aenter__(self) -> Worker:
        if self.is_async and self.activity_worker is not None:  # async activities run on the caller's loop
            self.activity_worker.activity_loop = asyncio.get_running_loop()
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.shutdown_sync)
