"""Schedules on a real broker: a schedule every 2 s starts real workflows on a worker, and is
paused, triggered, updated and deleted from the CLI and the client."""

from __future__ import annotations

import time
from datetime import timedelta

import orjson
import pytest

from streamproc import workflow
from streamproc.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleSpec,
    ScheduleUpdate,
)
from streamproc.exceptions import InvalidArgument
from streamproc.worker import Worker
from tests.support.cli import cli_of, cli_settings
from tests.support.engines import EngineThread
from tests.support.polling import wait_until

pytestmark = pytest.mark.kafka

QUEUE = "scheduled"


@workflow.defn
class Report:
    @workflow.run
    async def run(self, region: str) -> str:
        info = workflow.info()
        return f"{region} by {info.workflow_id}"


@pytest.fixture
def env(bootstrap, namespace, tmp_path, monkeypatch):
    settings = cli_settings(bootstrap, namespace, tmp_path, monkeypatch, "schedules")
    cli = cli_of("schedule")

    with EngineThread(settings, idle_poll_ms=10), Client(bootstrap, namespace) as client, \
            Worker(client, task_queue=QUEUE, workflows=[Report]):
        yield client, cli


def _completed(client: Client, schedule_id: str) -> list:
    return [a for a in client.get_schedule_handle(schedule_id).describe().info.recent_actions
            if a.status == "COMPLETED"]


def test_a_schedule_every_2_s_runs_real_workflows_and_obeys_the_cli(env):
    client, cli = env
    cli("create", "-s", "every-2s", "--interval", "2s", "-w", "report", "--type", "Report", "-t", QUEUE,
        "-i", '"eu"')
    done = wait_until(lambda: len(_completed(client, "every-2s")) >= 2 and _completed(client, "every-2s"),
                      what="two scheduled runs")
    first = done[0]
    assert first.workflow_id.startswith("report-") and first.workflow_id.endswith("Z")
    assert client.get_workflow_handle(first.workflow_id).result(timeout=30) == f"eu by {first.workflow_id}"
    nominal = first.workflow_id.removeprefix("report-")
    assert int(nominal[17:19]) % 2 == 0  # epoch aligned: an even second

    assert "paused" in cli("pause", "-s", "every-2s", "--reason", "maintenance")
    described = orjson.loads(cli("describe", "-s", "every-2s", "-o", "json"))
    assert described["schedule"]["state"] == {"paused": True, "note": "maintenance", "limited_actions": False,
                                              "remaining_actions": 0}
    count = described["info"]["action_count"]
    time.sleep(4.5)
    assert orjson.loads(cli("describe", "-s", "every-2s", "-o", "json"))["info"]["action_count"] == count

    cli("trigger", "-s", "every-2s")  # runs while paused
    wait_until(lambda: client.get_schedule_handle("every-2s").describe().info.num_actions == count + 1,
               what="the triggered action")

    past = int(time.time()) // 2 * 2 - 100  # an even second before the schedule existed
    at = [time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(past + s)) for s in (0, 4)]
    assert "backfill" in cli("backfill", "-s", "every-2s", "--start-time", at[0], "--end-time", at[1],
                             "--overlap-policy", "ALLOW_ALL")
    backfilled = wait_until(lambda: [a for a in client.get_schedule_handle("every-2s").describe().info.recent_actions
                                     if a.workflow_id <= f"report-{at[1]}"], what="the backfilled actions")
    assert sorted(a.workflow_id for a in backfilled) == [
        "report-" + time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(past + s)) for s in (0, 2, 4)]
    assert "unpaused" in cli("toggle", "-s", "every-2s", "--unpause", "--reason", "back")
    assert orjson.loads(cli("describe", "-s", "every-2s", "-o", "json"))["schedule"]["state"]["paused"] is False

    cli("update", "-s", "every-2s", "--interval", "1h", "-w", "report", "--type", "Report", "-t", QUEUE,
        "-i", '"us"', "--paused")
    described = orjson.loads(cli("describe", "-s", "every-2s", "-o", "json"))
    assert described["schedule"]["spec"]["interval"] == [{"interval_ms": 3_600_000, "phase_ms": 0}]
    assert "every-2s" in cli("list")
    assert "deleted" in cli("delete", "-s", "every-2s")
    assert "not found" in cli("describe", "-s", "every-2s", code=1)
    assert "Invalid schedule spec: CronString does not have 5-7 fields" in cli(
        "create", "-s", "bad", "--cron", "0 12 * *", "-w", "r", "--type", "Report", "-t", QUEUE, code=1)


def test_the_python_client_creates_updates_and_lists_schedules(env):
    client, _ = env
    schedule = Schedule(action=ScheduleActionStartWorkflow(Report.run, "apac", id="py-report", task_queue=QUEUE),
                        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(hours=1))]))
    handle = client.create_schedule("py-hourly", schedule, trigger_immediately=True, memo={"team": "ops"})
    with pytest.raises(ScheduleAlreadyRunningError):
        client.create_schedule("py-hourly", schedule)
    with pytest.raises(InvalidArgument, match="memo is 10000008 bytes, more than the limit of 262144"):
        client.create_schedule("py-huge", schedule, memo={"x": "y" * 10_000_000})
    done = wait_until(lambda: _completed(client, "py-hourly"), what="the immediate trigger's run")
    assert client.get_workflow_handle(done[0].workflow_id).result(timeout=30).startswith("apac by py-report-")

    description = handle.describe()
    assert description.schedule.action.workflow == "Report" and description.memo == {"team": "ops"}
    assert len(description.info.next_action_times) == 10

    def pause_it(update):
        s = update.description.schedule
        return ScheduleUpdate(Schedule(action=s.action, spec=s.spec, policy=s.policy,
                                       state=type(s.state)(note="by update", paused=True)))

    handle.update(pause_it)
    described = handle.describe()
    assert described.schedule.state.paused and described.schedule.state.note == "by update"
    assert len(described.info.next_action_times) == 10  # listed while paused, as Temporal does
    assert "py-hourly" in [s.id for s in client.list_schedules()]
    handle.delete()
    assert "py-hourly" not in [s.id for s in client.list_schedules()]
