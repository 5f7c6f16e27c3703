"""Signals and queries end to end on a real broker: engine (manual clock), Worker, client."""

from __future__ import annotations

import threading
import time

import pytest

from streamproc import workflow
from streamproc.client import (
    Client,
    QueryRejectCondition,
    WorkflowAlreadyStartedError,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateStage,
)
from streamproc.client.errors import CommandRejectedError
from streamproc.semantics.workflow_history import check_well_formed
from streamproc.semantics.workflow_events import EventType
from streamproc.semantics.workflow_ids import WorkflowExecutionStatus
from tests.support.engines import workflow_setup
from tests.support.orders import Order

pytestmark = pytest.mark.kafka

QUEUE = "signals"
SENDERS, PER_SENDER = 10, 100


@workflow.defn
class Collector:
    """Keeps every signal's value, in the order the workflow saw them, until `expected`."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    @workflow.run
    async def run(self, expected: int) -> list[str]:
        await workflow.wait_condition(lambda: len(self.seen) >= expected)
        return self.seen

    @workflow.signal
    def put(self, value: str) -> None:
        self.seen.append(value)


@pytest.fixture
def client(bootstrap, namespace, tmp_path):
    with workflow_setup(bootstrap, namespace, tmp_path, QUEUE, [Order, Collector], name="signals") as c:
        yield c


def _settled(handle, timeout: float = 30) -> list[str]:
    """The run's event types once its last workflow task completed (nothing is out)."""
    deadline = time.monotonic() + timeout
    while True:
        types = [e["event_type"] for e in handle.fetch_history().events]
        if types[-1] == "WORKFLOW_TASK_COMPLETED" or time.monotonic() > deadline:
            return types
        time.sleep(0.05)


def _signaled(handle) -> list[dict]:
    return [e["attributes"] for e in handle.fetch_history().events if e["event_type"] == "WORKFLOW_EXECUTION_SIGNALED"]


def test_the_order_workflow_is_driven_by_signals_and_read_by_queries(client):
    handle = client.start_workflow(Order.run, "ann", id="order-1", task_queue=QUEUE)
    handle.signal(Order.add_item, "apple")
    handle.signal("add_item", "pear")
    assert handle.query(Order.count) == 2
    with pytest.raises(WorkflowQueryFailedError, match="ValueError: no answer today"):
        handle.query(Order.broken)
    with pytest.raises(WorkflowQueryFailedError, match="Query handler for 'nope' expected but not found"):
        handle.query("nope")
    assert "wait_condition" in handle.query("__stack_trace")
    handle.signal(Order.approve)
    assert handle.result(60) == {"customer": "ann", "items": ["apple", "pear"]}

    history = [(e["event_id"], EventType[e["event_type"]], e["attributes"]) for e in handle.fetch_history().events]
    assert check_well_formed(history) == []
    assert [a["signal_name"] for a in _signaled(handle)] == ["add_item", "add_item", "approve"]
    assert {a["identity"] for a in _signaled(handle)} == {client.identity}
    # A closed run: queries replay it; a reject condition refuses; a signal is refused.
    assert handle.query(Order.count) == 2
    with pytest.raises(WorkflowQueryRejectedError) as rejected:
        handle.query(Order.count, reject_condition=QueryRejectCondition.NOT_OPEN)
    assert rejected.value.status is WorkflowExecutionStatus.COMPLETED
    with pytest.raises(CommandRejectedError, match="workflow execution already completed"):
        handle.signal(Order.add_item, "late")


def test_a_thousand_signals_from_ten_senders_are_each_applied_once_in_one_order(client):
    handle = client.start_workflow(Collector.run, SENDERS * PER_SENDER, id="collector", task_queue=QUEUE)
    errors: list[BaseException] = []

    def send(sender: int) -> None:
        try:
            with Client(client.bootstrap, client.topics.namespace) as own:
                mine = own.get_workflow_handle("collector")
                for n in range(PER_SENDER):
                    mine.signal(Collector.put, f"{sender}-{n}")
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=send, args=(s,)) for s in range(SENDERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert errors == []
    seen = handle.result(120)
    assert sorted(seen) == sorted(f"{s}-{n}" for s in range(SENDERS) for n in range(PER_SENDER))
    recorded = [a["input"] for a in _signaled(handle)]
    assert [f'["{v}"]' for v in seen] == recorded  # the code saw them in history's order
    for s in range(SENDERS):  # and each sender's in the order it sent them
        mine = [v for v in seen if v.startswith(f"{s}-")]
        assert mine == [f"{s}-{n}" for n in range(PER_SENDER)]


def test_signal_with_start_racing_a_start_makes_one_run_that_gets_the_signal_once(client):
    outcomes: dict[str, object] = {}

    def plain() -> None:
        try:
            outcomes["start"] = client.start_workflow(Order.run, "bob", id="race", task_queue=QUEUE).run_id
        except WorkflowAlreadyStartedError as exc:
            outcomes["start"] = exc

    def with_signal() -> None:
        outcomes["sws"] = client.start_workflow(Order.run, "bob", id="race", task_queue=QUEUE,
                                                start_signal=Order.add_item, start_signal_args=["gift"]).run_id

    threads = [threading.Thread(target=plain), threading.Thread(target=with_signal)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    handle = client.get_workflow_handle("race")
    if isinstance(outcomes["start"], WorkflowAlreadyStartedError):
        assert outcomes["start"].run_id == outcomes["sws"]
    else:
        assert outcomes["start"] == outcomes["sws"]  # the signal went to the run the start made
    assert handle.query(Order.count) == 1
    handle.signal("approve")
    assert handle.result(60) == {"customer": "bob", "items": ["gift"]}
    assert [a["signal_name"] for a in _signaled(handle)] == ["add_item", "approve"]


def test_updates_are_validated_applied_once_and_leave_no_trace_when_rejected(client):
    handle = client.start_workflow(Order.run, "cy", id="order-upd", task_queue=QUEUE)
    handle.signal(Order.add_item, "a")
    handle.signal(Order.add_item, "b")
    before = _settled(handle)
    with pytest.raises(WorkflowUpdateFailedError) as rejected:
        handle.execute_update(Order.remove_item, "zzz")
    assert str(rejected.value.cause) == "no item zzz" and rejected.value.cause.type == "ValueError"
    assert [e["event_type"] for e in handle.fetch_history().events] == before  # no trace

    assert handle.execute_update(Order.remove_item, "a", id="u-1") == 1
    assert handle.execute_update(Order.remove_item, "a", id="u-1") == 1  # the same id: applied once
    accepted = handle.start_update("remove_item", "b", id="u-2", wait_for_stage=WorkflowUpdateStage.ACCEPTED)
    assert accepted.result(30) == 0
    assert handle.query(Order.count) == 0
    handle.signal(Order.approve)
    assert handle.result(60) == {"customer": "cy", "items": []}
    types = [e["event_type"] for e in handle.fetch_history().events]
    assert types.count("WORKFLOW_EXECUTION_UPDATE_ACCEPTED") == 2 and types.count("WORKFLOW_EXECUTION_UPDATE_COMPLETED") == 2
    history = [(e["event_id"], EventType[e["event_type"]], e["attributes"]) for e in handle.fetch_history().events]
    assert check_well_formed(history) == []
