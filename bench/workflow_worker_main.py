"""`python -m bench.workflow_worker_main QUEUE`: the combined Worker for the benchmark workflows.

There is no CLI for the combined Worker yet; the benchmarks start this module as a
child process (STREAMPROC_BOOTSTRAP and STREAMPROC_NAMESPACE name the broker and topics).
"""

from __future__ import annotations

import sys

from bench.workflow_definitions import ACTIVITIES, WORKFLOWS
from streamproc.client import Client
from streamproc.logs import configure_logging
from streamproc.worker import Worker


def main() -> None:
    configure_logging()
    queue = sys.argv[1]
    with Client() as client:
        Worker(client, task_queue=queue, workflows=WORKFLOWS, activities=ACTIVITIES).run()


if __name__ == "__main__":
    main()
