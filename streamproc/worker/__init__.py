"""Workers: processes that join a task queue's consumer group and run handlers for its jobs."""

from streamproc.worker.activity_worker import ActivityWorker, WorkerStats
from streamproc.worker.job_worker import ActivatedJob, JobFailure, JobWorker
from streamproc.kafka.replies import Reply, ReplyListener
from streamproc.worker.worker import Worker
from streamproc.worker.workflow_worker import WorkflowWorker, WorkflowWorkerStats

__all__ = ["ActivatedJob", "JobFailure", "JobWorker", "ActivityWorker", "WorkerStats",
           "Reply", "ReplyListener", "Worker", "WorkflowWorker", "WorkflowWorkerStats"]
