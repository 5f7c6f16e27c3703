"""Testing helpers, as Temporal's ``temporalio.testing``: `WorkflowEnvironment` runs a real
engine in this process (with time skipping, or on real time), `ActivityEnvironment` runs
an activity function with a fake attempt around it."""

from streamproc.testing.activity_environment import ActivityEnvironment
from streamproc.testing.workflow_environment import WorkflowEnvironment

__all__ = ["ActivityEnvironment", "WorkflowEnvironment"]
