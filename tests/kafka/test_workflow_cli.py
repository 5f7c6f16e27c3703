"""`streamproc workflow ...` against a real broker, an engine and a worker in this process."""

from __future__ import annotations

import re
import time
from datetime import timedelta

import orjson
import pytest

from streamproc import activity, workflow
from streamproc.client import Client, WorkflowFailureError
from streamproc.client.errors import TerminatedError
from streamproc.worker import Worker
from tests.support.cli import cli_of, cli_settings
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


@workflow.defn
class Mailbox:
    def __init__(self) -> None:
        self.letters: list = []

    @workflow.run
    async def run(self) -> list:
        await workflow.wait_condition(lambda: "stop" in self.letters)
        return self.letters

    @workflow.signal
    def post(self, letter: object) -> None:
        self.letters.append(letter)

    @workflow.update
    def burn(self, index: int) -> int:
        self.letters.pop(index)
        return len(self.letters)

    @burn.validator
    def _can_burn(self, index: int) -> None:
        if not 0 <= index < len(self.letters):
            raise ValueError(f"no letter {index}")

    @workflow.query
    def letters_from(self, who: str) -> list:
        return [letter for letter in self.letters if isinstance(letter, dict) and letter.get("from") == who]


@workflow.defn
class Tick:
    """A cron workflow that counts its runs through the last completion result."""

    @workflow.run
    async def run(self) -> dict:
        previous = workflow.get_last_completion_result() if workflow.has_last_completion_result() else {"n": 0}
        return {"n": previous["n"] + 1, "cron": workflow.info().cron_schedule}


@pytest.fixture
def cli(bootstrap, namespace, tmp_path, monkeypatch):
    settings = cli_settings(bootstrap, namespace, tmp_path, monkeypatch, "cli")
    run = cli_of("workflow")

    with EngineThread(settings, idle_poll_ms=10), Client(bootstrap, namespace) as client, \
            Worker(client, task_queue=QUEUE, workflows=[Greeter, Waiter, Mailbox, Tick], activities=[greet]):
        yield run


def test_start_result_describe_show_and_list(cli):
    started = orjson.loads(cli("start", "--type", "Greeter", "-t", QUEUE, "-w", "greet-1",
                               "-i", '"ann"', "-i", "2", "-o", "json"))
    assert started["workflow_id"] == "greet-1" and started["run_id"]
    assert cli("result", "-w", "greet-1", "--timeout", "60").strip() == '["hello ann","hello ann"]'

    described = orjson.loads(cli("describe", "-w", "greet-1", "-o", "json"))
    assert described["run_id"] == started["run_id"] and described["workflow_type"] == "Greeter"
    table = cli("describe", "-w", "greet-1")
    assert table.startswith("Execution Info:\n  WorkflowId ") and re.search(r"\n  Type +Greeter\n", table)
    assert re.search(r"\n  Status +COMPLETED\n", table) and " ago)" in table  # human times
    assert "Pending Activities: 0" in table and "Pending Timers: 0" in table

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


def test_a_delayed_start_runs_its_code_after_the_delay(cli):
    refused = cli("start", "--type", "Tick", "-t", QUEUE, "-w", "late", "--cron", "@hourly", "--start-delay", "1s",
                  code=1)
    assert "CronSchedule and WorkflowStartDelay may not be used together." in refused and "Traceback" not in refused
    began = time.monotonic()
    cli("start", "--type", "Greeter", "-t", QUEUE, "-w", "late", "-i", '"bo"', "-i", "1", "--start-delay", "2s")
    described = orjson.loads(cli("describe", "-w", "late", "-o", "json"))
    assert (described["status"], described["history_length"]) == ("RUNNING", 1)
    assert described["execution_time_ms"] - described["start_time_ms"] == 2000
    table = cli("describe", "-w", "late")
    start, execution = (re.search(rf"\n  {name} +([^(\n]+)", table).group(1) for name in ("StartTime", "ExecutionTime"))
    assert execution != start  # shown, two seconds later
    assert cli("result", "-w", "late", "--timeout", "60").strip() == '["hello bo"]'
    assert time.monotonic() - began >= 2


def test_a_duplicate_start_and_a_terminated_run_are_reported(cli):
    cli("start", "--type", "Waiter", "-t", QUEUE, "-w", "wait-1", "--execution-timeout", "7d")
    deadline = time.monotonic() + 30
    while "Pending Timers: 1" not in (table := cli("describe", "-w", "wait-1")) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "Pending Timers: 1\n  TimerId " in table and "(in 23h 59m)" in table  # the one-day sleep
    assert re.search(r"\n  ExecutionTimeout +7d\n", table)
    duplicate = cli("start", "--type", "Waiter", "-t", QUEUE, "-w", "wait-1", code=1)
    assert "Workflow execution is already running. WorkflowId: wait-1, RunId: " in duplicate

    assert "TERMINATE sent for wait-1" in cli("terminate", "-w", "wait-1", "--reason", "from the shell", "--no-wait")
    failed = orjson.loads(cli("result", "-w", "wait-1", "--timeout", "60", "-o", "json", code=1))
    assert failed["status"] == "TerminatedError" and failed["failure"]["message"] == "from the shell"
    running = orjson.loads(cli("list", "--status", "RUNNING", "-o", "json"))
    assert running == []
    assert "not found" in cli("describe", "-w", "no-such-workflow", code=1).lower()


def test_signal_query_and_stack(cli):
    cli("start", "--type", "Mailbox", "-t", QUEUE, "-w", "mail-1")
    assert "signal post sent to mail-1" in cli("signal", "-w", "mail-1", "--name", "post", "-i", '{"from": "ann"}')
    cli("signal", "-w", "mail-1", "--name", "post", "-i", '{"from": "bob"}')
    assert orjson.loads(cli("query", "-w", "mail-1", "--type", "letters_from", "-i", '"ann"')) == [{"from": "ann"}]
    answer = orjson.loads(cli("query", "-w", "mail-1", "--type", "letters_from", "-i", '"bob"', "-o", "json"))
    assert answer == {"workflow_id": "mail-1", "query_type": "letters_from", "result": [{"from": "bob"}]}
    assert "wait_condition" in cli("stack", "-w", "mail-1")
    # errors are one line, never a traceback
    unknown = cli("query", "-w", "mail-1", "--type", "nope", code=1)
    assert "Query handler for 'nope' expected but not found" in unknown and "Traceback" not in unknown
    cli("signal", "-w", "mail-1", "--name", "post", "-i", '"junk"')
    assert cli("update", "-w", "mail-1", "--name", "burn", "-i", "2", "--update-id", "b-1").strip() == "2"
    assert cli("update-result", "-w", "mail-1", "--update-id", "b-1").strip() == "2"  # anyone may ask, by id
    unknown = cli("update-result", "-w", "mail-1", "--update-id", "b-0", code=1)
    assert 'update "b-0" not found' in unknown and "Traceback" not in unknown
    refused = cli("update", "-w", "mail-1", "--name", "burn", "-i", "7", code=1)
    assert "Workflow update failed: no letter 7" in refused and "Traceback" not in refused
    assert "not waiting" in cli("signal", "-w", "mail-1", "--name", "post", "-i", '"stop"', "--no-wait")
    assert orjson.loads(cli("result", "-w", "mail-1", "--timeout", "1m")) == [{"from": "ann"}, {"from": "bob"}, "stop"]
    closed = cli("signal", "-w", "mail-1", "--name", "post", "-i", "1", code=1)
    assert "workflow execution already completed" in closed and "Traceback" not in closed
    rejected = cli("query", "-w", "mail-1", "--type", "letters_from", "-i", '"ann"',
                   "--reject-condition", "NOT_OPEN", code=1)
    assert "Query rejected, status: COMPLETED" in rejected


def test_a_cron_workflow_runs_every_two_seconds_until_terminated(cli, bootstrap, namespace):
    """In real time: three runs of `--cron '@every 2s'`, each counting on the last one's
    result and scheduled 2 s after the one before; then terminated, which ends the chain."""
    refused = cli("start", "--type", "Tick", "-t", QUEUE, "-w", "tick", "--cron", "0 0 * * 7", code=1)
    assert "invalid CronSchedule." in refused
    began = time.monotonic()
    started = orjson.loads(cli("start", "--type", "Tick", "-t", QUEUE, "-w", "tick", "--cron", "@every 2s",
                               "-o", "json"))
    run_id, results, execution_times = started["run_id"], [], []
    with Client(bootstrap, namespace) as client:
        for _ in range(3):
            run = client.get_workflow_handle("tick", run_id=run_id)
            results.append(run.result(20, follow_runs=False))
            execution_times.append(run.describe().raw["execution_time_ms"])
            run_id = run.fetch_history().events[-1]["attributes"]["new_execution_run_id"]
            assert run_id  # a cron run follows every completed one
        assert results == [{"n": n, "cron": "@every 2s"} for n in (1, 2, 3)]
        gaps = [b - a for a, b in zip(execution_times, execution_times[1:])]
        assert all(2000 <= gap < 3000 for gap in gaps), gaps  # 2 s after the previous scheduled time
        assert time.monotonic() - began < 20

        assert "terminated tick" in cli("terminate", "-w", "tick", "--reason", "enough ticks")
        with pytest.raises(WorkflowFailureError) as ended:
            client.get_workflow_handle("tick", run_id=started["run_id"]).result(20)  # follows the chain
        assert isinstance(ended.value.cause, TerminatedError)
        assert client.get_workflow_handle("tick").describe().raw["status"] == "TERMINATED"
        time.sleep(2.5)  # no run follows a terminated one
        assert client.get_workflow_handle("tick").describe().raw["run_id"] == run_id
