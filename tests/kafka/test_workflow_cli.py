"""`streamproc workflow ...` against a real broker, an engine and a worker in this process."""

from __future__ import annotations

from datetime import timedelta

import orjson
import pytest
from click.testing import CliRunner

from streamproc import activity, workflow
from streamproc.cli.main import main
from streamproc.client import Client
from streamproc.settings import Settings
from streamproc.worker import Worker
from tests.support.engines import EngineThread

pytestmark = pytest.mark.kafka

QUEUE = "cli"


@activity.defn
def greet(name: str) -> str:
    return f"hello {name}"


@workflow.defn
class Greeter:
    @workflow.run
    async def run(self, name: str, times: int) -> list[str]:
        return [await workflow.execute_activity(greet, name, start_to_close_timeout=timedelta(seconds=30))
                for _ in range(times)]


@workflow.defn
class Waiter:
    @workflow.run
    async def run(self) -> None:
        await workflow.sleep(timedelta(days=1))


@pytest.fixture
def cli(bootstrap, namespace, tmp_path, monkeypatch):
    monkeypatch.setenv("STREAMPROC_BOOTSTRAP", bootstrap)
    monkeypatch.setenv("STREAMPROC_NAMESPACE", namespace)
    settings = Settings(bootstrap=bootstrap, namespace=namespace, partitions=2, state_dir=tmp_path,
                        engine_id="cli")
    runner = CliRunner()

    def run(*args: str, code: int = 0) -> str:
        result = runner.invoke(main, ["workflow", *args], catch_exceptions=False)
        assert result.exit_code == code, result.output
        # On success stdout only: log lines of the engine and worker threads of this process
        # go to the stderr the command's logging was configured with, which the runner
        # captures too (a JSON document followed by a log line is not JSON).
        return result.stdout if code == 0 else result.output

    with EngineThread(settings, idle_poll_ms=10), Client(bootstrap, namespace) as client, \
            Worker(client, task_queue=QUEUE, workflows=[Greeter, Waiter], activities=[greet]):
        yield run


def test_start_result_describe_show_and_list(cli):
    started = orjson.loads(cli("start", "--type", "Greeter", "-t", QUEUE, "-w", "greet-1",
                               "-i", '"ann"', "-i", "2", "-o", "json"))
    assert started["workflow_id"] == "greet-1" and started["run_id"]
    assert cli("result", "-w", "greet-1", "--timeout", "60").strip() == '["hello ann","hello ann"]'

    described = orjson.loads(cli("describe", "-w", "greet-1", "-o", "json"))
    assert described["run_id"] == started["run_id"] and described["workflow_type"] == "Greeter"
    assert "workflow_type" in cli("describe", "-w", "greet-1")

    history = orjson.loads(cli("show", "-w", "greet-1", "-o", "json"))["events"]
    assert history[0]["event_type"] == "WORKFLOW_EXECUTION_STARTED"
    assert history[-1]["event_type"] == "WORKFLOW_EXECUTION_COMPLETED"
    table = cli("show", "-w", "greet-1").splitlines()
    assert table[0].split() == ["ID", "TIME", "TYPE", "ATTRIBUTES"] and len(table) == len(history) + 1

    listed = orjson.loads(cli("list", "-o", "json"))
    assert [(r["workflow_id"], r["run_id"], r["workflow_type"], r["status"]) for r in listed] == [
        ("greet-1", started["run_id"], "Greeter", "COMPLETED")]
    table = cli("list").splitlines()
    assert table[0].split()[:4] == ["WORKFLOW", "ID", "RUN", "ID"] and "COMPLETED" in table[1]


def test_a_duplicate_start_and_a_terminated_run_are_reported(cli):
    cli("start", "--type", "Waiter", "-t", QUEUE, "-w", "wait-1")
    duplicate = cli("start", "--type", "Waiter", "-t", QUEUE, "-w", "wait-1", code=1)
    assert "Workflow execution is already running. WorkflowId: wait-1, RunId: " in duplicate

    assert "terminated wait-1" in cli("terminate", "-w", "wait-1", "--reason", "from the shell")
    failed = orjson.loads(cli("result", "-w", "wait-1", "--timeout", "60", "-o", "json", code=1))
    assert failed["status"] == "TerminatedError" and failed["failure"]["message"] == "from the shell"
    running = orjson.loads(cli("list", "--status", "RUNNING", "-o", "json"))
    assert running == []
    assert "not found" in cli("describe", "-w", "no-such-workflow", code=1).lower()
