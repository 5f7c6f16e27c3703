"""Client calls across a broker outage: retried with the same request id until their
deadline, and an honest answer when they give up.

Each test runs its own single-node broker (ports 29300-29309, state under tmp_path) and an
engine process, kills the broker with SIGKILL and starts it again; the suite's shared
broker is never touched.
"""

from __future__ import annotations

import threading
import time

import pytest

from streamproc.client import Client
from streamproc.client.errors import (
    CommandsNotDeliveredError,
    TerminatedError,
    WorkflowFailureError,
    WorkflowNotFoundError,
    WorkflowNotStartedError,
    WorkflowStartOutcomeUnknownError,
)
from streamproc.devenv.broker import LocalBroker
from tests.support.engines import Process, _env
from tests.support.history import EventLog

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(180)]

NAMESPACE = "outage"


@pytest.fixture
def broker(request, tmp_path):
    broker = LocalBroker(port=request.param, controller_port=request.param + 1,
                         state_dir=tmp_path / "kafka", heap="-Xms512m -Xmx512m")
    broker.start()
    yield broker
    broker.kill()  # its data goes with tmp_path


@pytest.fixture
def engine(broker, tmp_path):
    env = _env(broker.bootstrap, NAMESPACE, STREAMPROC_ENGINE_ID="outage-1", STREAMPROC_PARTITIONS="2",
               STREAMPROC_STATE_DIR=str(tmp_path / "state"))
    process = Process(["engine", "run"], env, tmp_path / "engine.log").start()
    process.wait_for_log("partitions_assigned")
    yield process
    process.stop()


def started_runs(broker: LocalBroker, workflow_id: str, timeout: float = 30) -> list:
    """The WorkflowExecutionStarted events of `workflow_id`, everything committed read."""
    events = EventLog(broker.bootstrap, NAMESPACE)
    try:
        events.read_to_end(timeout)
        return [e for e in events.events("WORKFLOW", "WORKFLOW_EXECUTION_STARTED")
                if e.value["workflow_id"] == workflow_id]
    finally:
        events.close()


def start_with_new_client(broker: LocalBroker, **options):
    with Client(broker.bootstrap, NAMESPACE) as client:
        return client.start_workflow("Order", task_queue="orders", **options)


class Call(threading.Thread):
    """A client call on a thread, keeping what it returned or raised."""

    def __init__(self, fn) -> None:
        super().__init__(daemon=True)
        self.fn = fn
        self.result = self.error = None

    def run(self) -> None:
        try:
            self.result = self.fn()
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            self.error = exc


@pytest.mark.parametrize("broker", [29300], indirect=True)
def test_a_start_during_a_broker_restart_returns_the_run_started_once(broker, engine):
    with Client(broker.bootstrap, NAMESPACE) as warm:
        # Its replies listener and partition count exist before the outage, and must survive it.
        before = warm.start_workflow("Order", id="before", task_queue="orders", rpc_timeout=30)
        waiting = Call(lambda: before.result(timeout=90))  # reads the events partition across the outage
        waiting.start()
        time.sleep(1)
        broker.kill()
        t0 = time.monotonic()
        # Concurrent starts, as under load (the 64 calls that claimed failure).
        during = {f"during-{i}": Call(lambda i=i: warm.start_workflow(
            "Order", id=f"during-{i}", task_queue="orders", request_id=f"req-{i}", rpc_timeout=55))
            for i in range(8)}
        # A client made while the broker is away: it learns the topics when the broker is back.
        fresh = Call(lambda: start_with_new_client(broker, id="fresh", rpc_timeout=55))
        for call in (*during.values(), fresh):
            call.start()
        time.sleep(10)
        broker.start()
        for call in (*during.values(), fresh):
            call.join(60)
        took = time.monotonic() - t0
        assert [c.error for c in (*during.values(), fresh) if c.error is not None] == []
        for workflow_id, call in during.items():
            (run,) = started_runs(broker, workflow_id)  # once, however many copies were sent
            assert call.result.run_id == run.value["run_id"]
            assert run.request_id == f"req-{workflow_id.removeprefix('during-')}"
        assert len(started_runs(broker, "fresh")) == 1
        before.terminate("seen across the outage", rpc_timeout=30)
        waiting.join(30)
        assert isinstance(waiting.error, WorkflowFailureError), waiting.error
        assert isinstance(waiting.error.cause, TerminatedError) and "across the outage" in str(waiting.error.cause)
        print(f"answered {took:.1f} s after the broker was killed")


@pytest.mark.parametrize("broker", [29302], indirect=True)
def test_a_start_past_its_deadline_says_unknown_and_the_run_starts_once_or_never(broker, engine):
    with Client(broker.bootstrap, NAMESPACE) as client:
        client.start_workflow("Order", id="before", task_queue="orders", rpc_timeout=30)
        broker.kill()
        t0 = time.monotonic()
        with pytest.raises(WorkflowStartOutcomeUnknownError) as raised:
            client.start_workflow("Order", id="late", task_queue="orders", request_id="req-late", rpc_timeout=8)
        gave_up_after = time.monotonic() - t0
        unknown = raised.value
        assert unknown.workflow_id == "late" and unknown.request_id == "req-late"
        assert unknown.delivered is None  # the broker never confirmed a copy
        assert "req-late" in str(unknown) and "get_workflow_handle('late')" in str(unknown)
        assert 8 <= gave_up_after < 12
        # Nothing reached any broker: a new client cannot even find the topics, and says so.
        with pytest.raises(WorkflowNotStartedError) as not_started:
            start_with_new_client(broker, id="never", rpc_timeout=3)
        assert not_started.value.workflow_id == "never"
        time.sleep(max(0.0, unknown.may_land_until - time.time()))  # no copy of it can land after
        broker.start()

        # Look it up as the error says: started exactly once, or not at all.
        try:
            description = client.get_workflow_handle("late").describe(rpc_timeout=60)
            runs = started_runs(broker, "late")
            assert len(runs) == 1 and runs[0].value["run_id"] == description.run_id
        except WorkflowNotFoundError:
            assert started_runs(broker, "late") == []
        # Starting again with the same request id yields one run, whatever happened before.
        handle = client.start_workflow("Order", id="late", task_queue="orders", request_id="req-late",
                                       rpc_timeout=30)
        (run,) = started_runs(broker, "late")
        assert run.value["run_id"] == handle.run_id
        with pytest.raises(WorkflowNotFoundError):
            client.get_workflow_handle("never").describe(rpc_timeout=30)


@pytest.mark.parametrize("broker", [29304], indirect=True)
def test_flush_names_the_creates_whose_outcome_is_unknown_and_they_land_once(broker, engine):
    with Client(broker.bootstrap, NAMESPACE) as client:
        client.create_job("orders", {}, request_id="job-before")
        client.flush()
        broker.kill()
        client.create_job("orders", {"n": 1}, request_id="job-during")
        with pytest.raises(CommandsNotDeliveredError) as raised:
            client.flush(2)
        assert raised.value.unknown == ["job-during"] and raised.value.not_sent == {}
        assert "1 with an unknown outcome (first job-during)" in str(raised.value)
        broker.start()
        client.flush(60)  # the producer sent it when the broker came back: nothing left to report
    events = EventLog(broker.bootstrap, NAMESPACE)
    try:
        events.read_until(lambda e: any(r.request_id == "job-during" for r in e.events(intent="CREATED")), 60)
        events.read_to_end(30)
        # Once each (on the partitions the client put them on, read in no set order between them).
        assert sorted(r.request_id for r in events.events(intent="CREATED")) == ["job-before", "job-during"]
    finally:
        events.close()
