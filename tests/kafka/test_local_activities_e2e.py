"""Local activities end to end on a real broker: the workflow worker runs them inside the
workflow task, so a one-step workflow costs two commands (START and one task completion),
and a worker killed while one runs leaves it to the next worker, which runs it again; with
checkpoints, not the steps whose markers it journaled."""

from __future__ import annotations

import contextlib
from datetime import timedelta

import pytest

from streamproc import activity, workflow
from streamproc.client import Client
from streamproc.clock import ManualClock
from streamproc.semantics.workflow_events import EventType
from streamproc.semantics.workflow_history import check_well_formed
from streamproc.settings import Settings
from tests.support.crash_workflows import EFFECTS_DIR_VARIABLE, read_effects
from tests.support.engines import EngineThread, combined_worker_process, workflow_setup
from tests.support.polling import wait_until

pytestmark = pytest.mark.kafka

QUEUE = "local-steps"


@activity.defn
def double(n: int) -> int:
    return 2 * n


@workflow.defn
class OneLocalStep:
    @workflow.run
    async def run(self, n: int) -> int:
        return await workflow.execute_local_activity(double, n, start_to_close_timeout=timedelta(seconds=10))


@workflow.defn
class TenLocalSteps:
    @workflow.run
    async def run(self, n: int) -> int:
        for _ in range(10):
            n = await workflow.execute_local_activity(double, n, start_to_close_timeout=timedelta(seconds=10))
        return n


@pytest.fixture
def client(bootstrap, namespace, tmp_path):
    with workflow_setup(bootstrap, namespace, tmp_path, QUEUE, [OneLocalStep, TenLocalSteps], name="local") as c:
        yield c


def _well_formed(events) -> bool:
    return check_well_formed([(e["event_id"], EventType[e["event_type"]], e["attributes"]) for e in events]) == []


def test_a_one_step_local_activity_workflow_completes_with_one_task_and_a_marker(client):
    handle = client.start_workflow(OneLocalStep.run, 21, id="one-local", task_queue=QUEUE)
    assert handle.result(60) == 42
    events = handle.fetch_history().events
    assert [e["event_type"] for e in events] == [
        "WORKFLOW_EXECUTION_STARTED", "WORKFLOW_TASK_SCHEDULED", "WORKFLOW_TASK_STARTED",
        "WORKFLOW_TASK_COMPLETED", "MARKER_RECORDED", "WORKFLOW_EXECUTION_COMPLETED"]
    marker = events[4]["attributes"]
    assert marker["marker_name"] == "LocalActivity"
    assert (marker["details"]["activity_type"], marker["details"]["attempt"]) == ("double", 1)
    assert _well_formed(events)


def test_ten_local_steps_complete_in_one_task(client):
    handle = client.start_workflow(TenLocalSteps.run, 1, id="ten-local", task_queue=QUEUE)
    assert handle.result(60) == 1024
    types = [e["event_type"] for e in handle.fetch_history().events]
    assert types.count("MARKER_RECORDED") == 10 and types.count("WORKFLOW_TASK_COMPLETED") == 1


@contextlib.contextmanager
def two_workers(bootstrap, namespace, tmp_path, queue: str, workflow_spec: str, clock: ManualClock,
                options: tuple[str, ...] = ()):
    """An engine on `clock`, a client, and two worker processes of `queue` (not started;
    the first killed and the second stopped at the end), sharing an effects directory."""
    effects = tmp_path / "effects"
    effects.mkdir()
    env = {EFFECTS_DIR_VARIABLE: str(effects)}
    settings = Settings(bootstrap=bootstrap, namespace=namespace, partitions=2, state_dir=tmp_path / "state",
                        engine_id=queue)
    first, second = (combined_worker_process(bootstrap, namespace, queue, name, tmp_path, workflows=[workflow_spec],
                                             options=options, **env) for name in ("first", "second"))
    with EngineThread(settings, clock=clock, idle_poll_ms=10), Client(bootstrap, namespace) as client:
        try:
            yield client, first, second, effects
        finally:
            first.kill()
            second.stop()


def kill_the_first_in_its_slow_step(client, first, second, effects, run, workflow_id: str, queue: str,
                                    effects_before: int):
    """Start the workflow on the first worker, SIGKILL it once `effects_before` steps ran (the
    last, `slow_step`, waiting for its release), release the step and start the second."""
    first.start()
    first.wait_for_log("workflow_tasks_assigned")
    handle = client.start_workflow(run, workflow_id, id=workflow_id, task_queue=queue)
    wait_until(lambda: len(read_effects(effects)) == effects_before, 60, "the first worker did not reach the slow step")
    first.kill()
    (effects / "release").touch()
    second.start()
    return handle


def test_a_worker_sigkilled_mid_activity_leaves_it_to_the_next_worker_and_the_run_completes_once(
        bootstrap, namespace, tmp_path):
    from tests.support.local_activity_crash import SlowLocalStep

    with two_workers(bootstrap, namespace, tmp_path, "local-crash", "tests.support.local_activity_crash:SlowLocalStep",
                     ManualClock()) as (client, first, second, effects):
        handle = kill_the_first_in_its_slow_step(client, first, second, effects, SlowLocalStep.run, "crashy",
                                                 "local-crash", effects_before=1)
        assert handle.result(90) == "crashy done"
        events = handle.fetch_history().events
    runs = read_effects(effects)
    assert len(runs) == 2 and runs[0]["pid"] != runs[1]["pid"], "run again by the second worker: at least once"
    types = [e["event_type"] for e in events]
    assert types.count("MARKER_RECORDED") == 1 and types.count("WORKFLOW_EXECUTION_COMPLETED") == 1
    assert _well_formed(events)


def test_a_checkpointing_worker_sigkilled_mid_task_leaves_its_journaled_steps_to_the_next_attempt(
        bootstrap, namespace, tmp_path):
    from tests.support.local_activity_crash import QuickThenSlowSteps

    clock = ManualClock()
    with two_workers(bootstrap, namespace, tmp_path, "journal-crash",
                     "tests.support.local_activity_crash:QuickThenSlowSteps", clock,
                     options=("--checkpoint-local-activities",)) as (client, first, second, effects):
        # The quick step ran and its marker was journaled before the slow one started.
        handle = kill_the_first_in_its_slow_step(client, first, second, effects, QuickThenSlowSteps.run, "jc",
                                                 "journal-crash", effects_before=2)
        second.wait_for_log("workflow_tasks_assigned")
        clock.advance(timedelta(seconds=11))  # the task times out; its next attempt carries the journal
        assert handle.result(90) == ["jc quick", "jc done"]
        events = handle.fetch_history().events
    runs = read_effects(effects)
    quick = [r for r in runs if r.get("step") == "quick"]
    slow = [r for r in runs if r.get("step") != "quick"]
    assert len(quick) == 1, f"the journaled step ran again: {runs}"
    assert len(slow) == 2 and slow[0]["pid"] != slow[1]["pid"], "the slow step ran again: at least once"
    types = [e["event_type"] for e in events]
    assert "WORKFLOW_TASK_TIMED_OUT" in types
    assert types.count("MARKER_RECORDED") == 2 and types.count("WORKFLOW_EXECUTION_COMPLETED") == 1
    assert _well_formed(events)
