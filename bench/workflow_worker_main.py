"""`python -m bench.workflow_worker_main QUEUE`: the combined Worker for the benchmark workflows.

The benchmarks start this module as a child process (STREAMPROC_BOOTSTRAP and
STREAMPROC_NAMESPACE name the broker and topics; BENCH_NO_EAGER_ACTIVITIES=1 turns eager
activity execution off; BENCH_CHECKPOINT_LOCAL_ACTIVITIES=1 answers a workflow task after
each local activity, so each step's marker is on the log before the next step runs;
BENCH_NO_TASK_HAND_BACK=1 takes every workflow task from the task queue). SIGUSR2 logs its
workflow worker's stats (`worker_stats`: tasks answered, tasks that rode along with an
activity's completion and why the others did not), read by `bench.common.worker_stats`.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
import threading

import structlog

from bench.workflow_definitions import ACTIVITIES, WORKFLOWS
from streamproc.client import SyncClient
from streamproc.logs import configure_logging
from streamproc.worker import Worker

#: Set by `bench/run.py --no-eager-activities`.
NO_EAGER_ENV = "BENCH_NO_EAGER_ACTIVITIES"
#: Set by `bench/run.py --checkpoint-local-activities`.
CHECKPOINT_LOCAL_ENV = "BENCH_CHECKPOINT_LOCAL_ACTIVITIES"
#: Set by `bench/run.py --no-task-hand-back`.
NO_HAND_BACK_ENV = "BENCH_NO_TASK_HAND_BACK"
#: Set by `bench/run.py --no-task-ride-along`.
NO_RIDE_ALONG_ENV = "BENCH_NO_TASK_RIDE_ALONG"


def main() -> None:
    configure_logging()
    queue = sys.argv[1]
    with SyncClient() as client:
        worker = Worker(client, task_queue=queue, workflows=WORKFLOWS, activities=ACTIVITIES,
                        disable_eager_activity_execution=os.environ.get(NO_EAGER_ENV) == "1",
                        checkpoint_local_activities=os.environ.get(CHECKPOINT_LOCAL_ENV) == "1",
                        disable_workflow_task_hand_back=os.environ.get(NO_HAND_BACK_ENV) == "1",
                        disable_workflow_task_ride_along=os.environ.get(NO_RIDE_ALONG_ENV) == "1")

        def log_stats() -> None:
            stats = worker.workflow_worker.stats
            structlog.get_logger("bench.worker").info("worker_stats", **dataclasses.asdict(stats))

        # From a thread of its own: the signal may come while this thread is inside a log write.
        signal.signal(signal.SIGUSR2, lambda *_: threading.Thread(target=log_stats, daemon=True).start())
        worker.run()


if __name__ == "__main__":
    main()
