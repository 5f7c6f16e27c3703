"""A workflow of one slow local activity, loaded by worker processes by name, for the
test that SIGKILLs a workflow worker while the activity runs.

Each execution appends a line to a file of its own process in the directory named by
`EFFECTS_DIR_VARIABLE`, then waits until the file `release` exists there: the test
kills the worker while it waits, and releases the next worker's execution.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path

from streamproc import activity, workflow
from tests.support.crash_workflows import EFFECTS_DIR_VARIABLE, _record_effect


@activity.defn
def slow_step(workflow_id: str) -> str:
    _record_effect(workflow_id=workflow_id, pid=os.getpid())
    release = Path(os.environ[EFFECTS_DIR_VARIABLE]) / "release"
    while not release.exists():
        time.sleep(0.05)
    return f"{workflow_id} done"


@workflow.defn
class SlowLocalStep:
    @workflow.run
    async def run(self, workflow_id: str) -> str:
        return await workflow.execute_local_activity(slow_step, workflow_id, start_to_close_timeout=timedelta(minutes=1))


@activity.defn
def quick_step(workflow_id: str) -> str:
    _record_effect(workflow_id=workflow_id, step="quick", pid=os.getpid())
    return f"{workflow_id} quick"


@workflow.defn
class QuickThenSlowSteps:
    """A quick local activity, then a slow one: checkpointed, the quick one's marker is
    journaled before the slow one runs."""

    @workflow.run
    async def run(self, workflow_id: str) -> list[str]:
        timeout = timedelta(minutes=1)
        return [await workflow.execute_local_activity(quick_step, workflow_id, start_to_close_timeout=timeout),
                await workflow.execute_local_activity(slow_step, workflow_id, start_to_close_timeout=timeout)]
