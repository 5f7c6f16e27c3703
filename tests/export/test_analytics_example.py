"""The analytics example (examples/analytics/load_events.py) answers its two questions right.

An engine on a manual clock writes events through a real Schema Registry: activities wait a
known time on their task queues, in two different hours, and some workflows fail. The
example, run as a user runs it, loads the events topic into DuckDB and must give the
schedule-to-start p99 per queue and hour, and the failed workflows by type, that the test
made happen (and that streamproc's own reading of the same events gives).
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from streamproc import activity, workflow
from streamproc.client import ActivityClient, Client
from streamproc.clock import ManualClock
from streamproc.settings import Settings
from streamproc.worker import ActivityWorker, Worker
from tests.support.engines import EngineThread
from tests.support.history import EventLog
from tests.support.polling import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

EXAMPLE = Path(__file__).parents[2] / "examples" / "analytics" / "load_events.py"
TEN_O_CLOCK = datetime(2026, 3, 2, 10, 0, tzinfo=timezone.utc)


@activity.defn
def charge(order: str) -> str:
    return f"charged {order}"


@activity.defn
def ship(order: str) -> str:
    return f"shipped {order}"


@activity.defn
def pack(order: str) -> str:
    return f"packed {order}"


@workflow.defn
class PackWorkflow:
    @workflow.run
    async def run(self, order: str) -> str:
        return await workflow.execute_activity(pack, order, task_queue="packing",
                                               start_to_close_timeout=timedelta(minutes=1))


@workflow.defn
class ChargeWorkflow:
    @workflow.run
    async def run(self, order: str) -> str:
        raise workflow.ApplicationError(f"card declined for {order}", type="CardDeclined", non_retryable=True)


@workflow.defn
class ShipWorkflow:
    @workflow.run
    async def run(self, order: str) -> str:
        if order.startswith("lost"):
            raise workflow.ApplicationError(f"no address for {order}", non_retryable=True)
        return f"shipping {order}"


def _p99(values: list[int]) -> float:
    """quantile_cont: linear interpolation between the closest ranks."""
    ordered = sorted(values)
    position = 0.99 * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def test_the_example_answers_latency_p99_per_queue_and_hour_and_failed_workflows(
        bootstrap, namespace, schema_registry, tmp_path):
    clock = ManualClock(int(TEN_O_CLOCK.timestamp() * 1000))
    settings = Settings(bootstrap=bootstrap, namespace=namespace, partitions=2, state_dir=tmp_path,
                        engine_id="analytics-engine", schema_registry_url=schema_registry.url)
    timeouts = {"start_to_close_timeout": timedelta(minutes=1)}
    with EngineThread(settings, clock=clock, idle_poll_ms=10), Client(bootstrap, namespace) as client, \
            ActivityClient(client) as activities:
        # 10:00:00.000, no worker yet: three charges and two shipments wait; 1.5 s later a fourth charge.
        handles = [activities.schedule_activity(charge, f"o-{n}", task_queue="billing", **timeouts) for n in range(3)]
        handles += [activities.schedule_activity(ship, f"o-{n}", task_queue="shipping", **timeouts) for n in range(2)]
        clock.advance(1500)
        handles.append(activities.schedule_activity(charge, "o-3", task_queue="billing", **timeouts))
        clock.advance(2000)  # 10:00:03.500: the workers come; the clock stands still while they start
        with Worker(client, task_queue="billing", workflows=[ChargeWorkflow, ShipWorkflow, PackWorkflow],
                    activities=[charge]), \
                ActivityWorker("shipping", [ship], bootstrap=bootstrap, namespace=namespace):
            for handle in handles:
                handle.result(timeout=60)
            clock.set(int((TEN_O_CLOCK + timedelta(hours=1)).timestamp() * 1000))
            # 11:00: two charges find their worker waiting (no time passes on this clock).
            for n in range(2):
                activities.schedule_activity(charge, f"p-{n}", task_queue="billing", **timeouts).result(timeout=60)
            # A workflow's activity waits 2.5 s on "packing" until its worker comes.
            packing = client.start_workflow(PackWorkflow.run, "o-5", id="pack-1", task_queue="billing")
            wait_until(lambda: packing.describe().raw.get("pending_activities"))
            clock.advance(2500)
            with ActivityWorker("packing", [pack], bootstrap=bootstrap, namespace=namespace):
                assert packing.result(timeout=60) == "packed o-5"
            outcomes = []
            for workflow_id, run, order in (("charge-1", ChargeWorkflow.run, "o-1"), ("charge-2", ChargeWorkflow.run, "o-2"),
                                            ("ship-1", ShipWorkflow.run, "lost-1"), ("ship-2", ShipWorkflow.run, "o-4")):
                clock.advance(1000)  # one after the other: the last failure of a type is well defined
                handle = client.start_workflow(run, order, id=workflow_id, task_queue="billing")
                try:
                    outcomes.append(handle.result(timeout=60))
                except Exception as exc:  # noqa: BLE001 - the failed ones
                    outcomes.append(type(exc).__name__)
        assert outcomes == ["WorkflowFailureError"] * 3 + ["shipping o-4"]
        events = EventLog(bootstrap, namespace)
        events.read_to_end(30)

    def example(*options: str) -> str:
        done = subprocess.run([sys.executable, str(EXAMPLE), "--bootstrap", bootstrap, "--namespace", namespace,
                               "--schema-registry", schema_registry.url, *options],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    answer = json.loads(example("--output", "json"))
    table = example()  # what a person sees: the same answers as tables
    assert f"{len(events.records)} events loaded" in table
    assert table.split("failed workflows by type")[1].split()[3:6] == ["ChargeWorkflow", "2", "card"]

    assert answer["events"] == len(events.records)
    # What the clock made: at 10:00 billing waited 3.5 s (three) and 2 s (one), shipping 3.5 s;
    # at 11:00 billing did not wait, and the workflow's activity waited 2.5 s on packing.
    assert answer["schedule_to_start_p99"] == [
        {"task_queue": "billing", "hour": "2026-03-02 10:00", "activities": 4, "p99_ms": _p99([3500, 3500, 3500, 2000])},
        {"task_queue": "billing", "hour": "2026-03-02 11:00", "activities": 2, "p99_ms": 0.0},
        {"task_queue": "packing", "hour": "2026-03-02 11:00", "activities": 1, "p99_ms": 2500.0},
        {"task_queue": "shipping", "hour": "2026-03-02 10:00", "activities": 2, "p99_ms": 3500.0},
    ]
    # ... and what streamproc's own reading of the events says.
    waits: dict[tuple[str, int], list[int]] = {}
    for r in events.events("ACTIVITY_TASK", "ActivityTaskStarted"):
        hour = r.value["scheduled_time_ms"] // 3_600_000
        waits.setdefault((r.value["task_queue"], hour), []).append(
            r.value["started_time_ms"] - r.value["scheduled_time_ms"])
    history = {(r.value["run_id"], r.value["event_id"]): r for r in events.events("WORKFLOW") if r.value["event_id"]}
    for (run_id, _), started in history.items():
        if started.intent == "ACTIVITY_TASK_STARTED":
            started, scheduled = started.value, history[(run_id, json.loads(started.value["attributes"])["scheduled_event_id"])].value
            waits.setdefault((json.loads(scheduled["attributes"])["task_queue"],
                              scheduled["event_time_ms"] // 3_600_000), []).append(
                started["event_time_ms"] - scheduled["event_time_ms"])
    assert [(row["task_queue"], row["activities"], row["p99_ms"]) for row in answer["schedule_to_start_p99"]] == [
        (queue, len(values), _p99(values)) for (queue, _), values in sorted(waits.items())]

    assert answer["failed_workflows"] == [
        {"workflow_type": "ChargeWorkflow", "failed": 2, "last_failure": "card declined for o-2"},
        {"workflow_type": "ShipWorkflow", "failed": 1, "last_failure": "no address for lost-1"},
    ]
