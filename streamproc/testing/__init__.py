"""Testing helpers, as Temporal's ``temporalio.testing``: `ActivityEnvironment` runs an
activity function with a fake attempt around it."""

from streamproc.testing.activity_environment import ActivityEnvironment
from streamproc.unsupported import unsupported_names

__all__ = ["ActivityEnvironment"]

__getattr__ = unsupported_names(__name__, {
    "WorkflowEnvironment": "the time-skipping workflow test environment",
})
