"""`streamproc worker start` as a real process: it runs a workflow and its activities, and
SIGTERM shuts it down cleanly (both parts leave their consumer groups)."""

from __future__ import annotations

import pytest

from streamproc.client import Client
from streamproc.settings import Settings
from tests.support.crash_workflows import EFFECTS_DIR_VARIABLE, ThreeStepsAndATimer, expected_result, read_effects
from tests.support.engines import EngineThread, combined_worker_process

pytestmark = pytest.mark.kafka


def test_worker_start_runs_workflows_and_activities_until_sigterm(bootstrap, namespace, tmp_path):
    settings = Settings(bootstrap=bootstrap, namespace=namespace, partitions=2, state_dir=tmp_path / "state",
                        engine_id="worker-cli")
    worker = combined_worker_process(bootstrap, namespace, "cli-q", "cli-worker", tmp_path,
                                     workflows=["tests.support.crash_workflows:ThreeStepsAndATimer"],
                                     activities=["tests.support.crash_workflows:crash_step"],
                                     **{EFFECTS_DIR_VARIABLE: str(tmp_path)})
    with EngineThread(settings, idle_poll_ms=10), Client(bootstrap, namespace) as client:
        try:
            worker.start().wait_for_log("workflow_tasks_assigned")
            worker.wait_for_log("tasks_assigned")
            handle = client.start_workflow(ThreeStepsAndATimer.run, "cli-1", id="cli-1", task_queue="cli-q")
            assert handle.result(60) == expected_result("cli-1")
            identities = {e["attributes"].get("identity") for e in handle.fetch_history().events} - {None, ""}
            assert identities == {"cli-worker"}
            client.close_workflow_requests()
        finally:
            worker.stop()
    assert worker.proc.returncode == 0, worker.log_text()[-2000:]
    log = worker.log_text()
    assert "workflow_worker_stopped" in log and "activity_worker_stopped" in log
    assert sorted((e["workflow_id"], e["step"], e["attempt"]) for e in read_effects(tmp_path)) == [
        ("cli-1", 1, 1), ("cli-1", 2, 1), ("cli-1", 3, 1)]
