"""Job handlers that worker processes of the tests load by name."""


def double(job):
    return {"n": job.payload["n"] * 2}


def _record_run(job) -> None:
    """Append `key attempt worker` to the file STREAMPROC_TEST_RUNS names: which handler ran what."""
    import os

    with open(os.environ["STREAMPROC_TEST_RUNS"], "a") as runs:
        runs.write(f"{job.key} {job.attempt} {os.environ.get('STREAMPROC_TEST_WORKER', '?')}\n")


def recorded_double(job):
    _record_run(job)
    return double(job)


def recorded_slow_double(job):
    """A second per job: a worker running these is killed with some started and some not."""
    import time

    _record_run(job)
    time.sleep(1)
    return double(job)


def recorded_hang(job):
    """Never returns (a stuck dependency): the worker's slots fill with attempts that time out."""
    import threading

    _record_run(job)
    threading.Event().wait()


def recorded_brief_double(job):
    """A fifth of a second per job: a worker killed mid-flow has some running, some waiting."""
    import time

    _record_run(job)
    time.sleep(0.2)
    return double(job)
