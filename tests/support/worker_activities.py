"""Activities named "work" that worker processes of the fault tests load by name: a healthy
one, a slow one and one that never returns. Each records `activity_id attempt worker` in
the file STREAMPROC_TEST_RUNS names when it starts running."""

from __future__ import annotations

import os
import threading
import time

from streamproc import activity


def _record_run() -> None:
    info = activity.info()
    with open(os.environ["STREAMPROC_TEST_RUNS"], "a") as runs:
        runs.write(f"{info.activity_id} {info.attempt} {os.environ.get('STREAMPROC_TEST_WORKER', '?')}\n")


@activity.defn(name="work")
def work(n: int) -> int:
    _record_run()
    return n * 2


@activity.defn(name="work")
def slow_work(n: int) -> int:
    _record_run()
    time.sleep(1)
    return n * 2


@activity.defn(name="work")
def hanging_work(n: int) -> int:
    _record_run()
    threading.Event().wait()
    return n
