"""A cron workflow end to end on a real broker, in real time: started from the CLI with
`--cron '@every 2s'`, three runs on a worker, each counting on the last one's result,
then terminated from the CLI, which ends the chain."""

from __future__ import annotations

import time

import orjson
import pytest
from click.testing import CliRunner

from streamproc import workflow
from streamproc.cli.main import main
from streamproc.client import Client, WorkflowFailureError
from streamproc.client.errors import TerminatedError
from streamproc.settings import Settings
from streamproc.worker import Worker
from tests.support.engines import EngineThread

pytestmark = pytest.mark.kafka

QUEUE = "cron"


@workflow.defn
class Tick:
    @workflow.run
    async def run(self) -> dict:
        previous = workflow.get_last_completion_result() if workflow.has_last_completion_result() else {"n": 0}
        return {"n": previous["n"] + 1, "cron": workflow.info().cron_schedule}


def test_cron_workflow_runs_every_two_seconds_until_terminated(bootstrap, namespace, tmp_path, monkeypatch):
    monkeypatch.setenv("STREAMPROC_BOOTSTRAP", bootstrap)
    monkeypatch.setenv("STREAMPROC_NAMESPACE", namespace)
    settings = Settings(bootstrap=bootstrap, namespace=namespace, partitions=2, state_dir=tmp_path,
                        engine_id="cron")
    runner = CliRunner()

    def cli(*args: str, code: int = 0) -> str:
        result = runner.invoke(main, ["workflow", *args], catch_exceptions=False)
        assert result.exit_code == code, result.output
        return result.stdout if code == 0 else result.output

    with EngineThread(settings, idle_poll_ms=10), Client(bootstrap, namespace) as client, \
            Worker(client, task_queue=QUEUE, workflows=[Tick]):
        refused = cli("start", "--type", "Tick", "-t", QUEUE, "-w", "tick", "--cron", "0 0 * * 7", code=1)
        assert "invalid CronSchedule." in refused
        began = time.monotonic()
        started = orjson.loads(cli("start", "--type", "Tick", "-t", QUEUE, "-w", "tick", "--cron", "@every 2s",
                                   "-o", "json"))
        run_id, results, execution_times = started["run_id"], [], []
        for _ in range(3):
            run = client.get_workflow_handle("tick", run_id=run_id)
            results.append(run.result(20, follow_runs=False))
            execution_times.append(run.describe().raw["execution_time_ms"])
            run_id = run.fetch_history().events[-1]["attributes"]["new_execution_run_id"]
            assert run_id  # a cron run follows every completed one
        assert results == [{"n": n, "cron": "@every 2s"} for n in (1, 2, 3)]
        gaps = [b - a for a, b in zip(execution_times, execution_times[1:])]
        assert all(2000 <= gap < 3000 for gap in gaps), gaps  # every 2 s from the previous scheduled time
        assert time.monotonic() - began < 20

        assert "terminated tick" in cli("terminate", "-w", "tick", "--reason", "enough ticks")
        with pytest.raises(WorkflowFailureError) as ended:
            client.get_workflow_handle("tick", run_id=started["run_id"]).result(20)  # follows the chain
        assert isinstance(ended.value.cause, TerminatedError)
        last = client.get_workflow_handle("tick").describe().raw
        assert last["run_id"] == run_id and last["status"] == "TERMINATED"
        time.sleep(2.5)  # no run follows a terminated one
        assert client.get_workflow_handle("tick").describe().raw["run_id"] == run_id
