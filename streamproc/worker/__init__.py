"""Workers: processes that join a task queue's consumer group and run handlers for its jobs."""

from streamproc.worker.job_worker import ActivatedJob, JobFailure, JobWorker

__all__ = ["ActivatedJob", "JobFailure", "JobWorker"]
