"""`Countdown`, a workflow that continues as new until its counter reaches zero; shared by
the broker tests that follow a chain of runs to its result."""

from __future__ import annotations

from streamproc import workflow


@workflow.defn
class Countdown:
    """Continues as new until its counter reaches zero."""

    @workflow.run
    async def run(self, left: int) -> str:
        if left > 0:
            workflow.continue_as_new(left - 1)
        return f"done in run {workflow.info().run_id}"
