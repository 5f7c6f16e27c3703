"""A cron workflow's code on the real engine processors (no broker, manual clock): each run
sees its schedule, the last completion result and the last failure, as Temporal's SDK
shows them, and its history replays cleanly."""

from __future__ import annotations


from streamproc import workflow
from streamproc.workflow.definition import WorkflowDefinition
from streamproc.workflow.instance import WorkflowInstance
from streamproc.workflow.replayer import Replayer
from tests.engine.workflow_driver import WorkflowDriver

MINUTE_MS = 60_000


@workflow.defn(name="Tally")
class Tally:
    """Counts its runs through the last completion result; run `fail_on` fails once."""

    @workflow.run
    async def run(self, fail_on: int) -> dict:
        previous = workflow.get_last_completion_result() if workflow.has_last_completion_result() else {"count": 0}
        failure = workflow.get_last_failure()
        count = previous["count"] + 1
        if count == fail_on and failure is None:
            raise workflow.ApplicationError("tally broke", type="TallyError")
        return {"count": count, "cron": workflow.info().cron_schedule,
                "after": None if failure is None else f"{type(failure).__name__}: {failure}"}


def run_once(d: WorkflowDriver) -> tuple[int, list[dict]]:
    """Wait for the current run's first task, answer it with the code; (run key, history)."""
    key = d.current_key("w1")
    d.run_until(d.run(key)["execution_time_ms"])
    history = d.history(key)
    outcome = WorkflowInstance(WorkflowDefinition.of(Tally), history).activate()
    assert not outcome.failed, outcome.failure
    d.complete(key, outcome.commands)
    return key, d.check(key)


def test_each_run_sees_the_last_result_and_the_last_failure(d):
    d.start(workflow_type="Tally", input="[2]", cron_schedule="@every 1m")
    closes = []
    for _ in range(3):
        key, history = run_once(d)
        closes.append(history[-1])
        assert Replayer(workflows=[Tally]).replay(history).commands == []
    assert [c["event_type"] for c in closes] == [
        "WORKFLOW_EXECUTION_COMPLETED", "WORKFLOW_EXECUTION_FAILED", "WORKFLOW_EXECUTION_COMPLETED"]
    assert closes[0]["attributes"]["result"] == '{"count":1,"cron":"@every 1m","after":null}'
    assert closes[1]["attributes"]["failure"]["message"] == "tally broke"
    # The run after the failure: the failure, and the result of the last successful run.
    assert closes[2]["attributes"]["result"] == '{"count":2,"cron":"@every 1m","after":"ApplicationError: tally broke"}'
    assert all(c["attributes"]["new_execution_run_id"] for c in closes)
