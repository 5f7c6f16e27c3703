"""Child workflows end to end on a real broker: parents and children on different partitions,
results, failures, parent close policies down a chain, signals between workflows."""

from __future__ import annotations

from datetime import timedelta

import pytest

from streamproc import workflow
from streamproc.client import WorkflowFailureError
from streamproc.protocol.partitioning import partition_for
from streamproc.semantics.workflow_events import EventType
from streamproc.semantics.workflow_history import check_well_formed
from streamproc.semantics.workflow_ids import WorkflowExecutionStatus
from tests.support import orders
from tests.support.engines import workflow_setup
from tests.support.polling import wait_until

pytestmark = pytest.mark.kafka

QUEUE = "children"
PARTITIONS = 2


@workflow.defn
class Payment:
    @workflow.run
    async def run(self, items: list) -> str:
        if not items:
            raise workflow.ApplicationError("nothing to pay for", type="EmptyCart", non_retryable=True)
        return f"receipt for {len(items)} items"


@workflow.defn
class Order(orders.Order):
    """The issue's sample (its signals, queries and update), paying with the Payment child."""

    @workflow.run
    async def run(self, customer: str) -> dict:
        await workflow.wait_condition(lambda: self.approved, timeout=timedelta(days=3))
        try:
            receipt = await workflow.execute_child_workflow(Payment.run, self.items, id=f"pay-{customer}",
                                                            parent_close_policy=workflow.ParentClosePolicy.REQUEST_CANCEL)
        except workflow.ChildWorkflowError as err:
            receipt = f"failed: {err.cause}"
        return {"items": self.items, "receipt": receipt}


@workflow.defn
class Holder:
    """Starts a child of its own (if `depth` > 0) with `policy`, then waits for a signal."""

    def __init__(self) -> None:
        self.released = False
        self.pinged = 0

    @workflow.run
    async def run(self, name: str, depth: int, policy: str) -> str:
        if depth > 0:
            await workflow.start_child_workflow(Holder.run, args=[f"{name}-c", depth - 1, policy], id=f"{name}-c",
                                                parent_close_policy=workflow.ParentClosePolicy[policy])
        await workflow.wait_condition(lambda: self.released)
        return name

    @workflow.signal
    def release(self) -> None:
        self.released = True

    @workflow.signal
    def ping(self) -> None:
        self.pinged += 1

    @workflow.query
    def pings(self) -> int:
        return self.pinged


@workflow.defn
class Pinger:
    @workflow.run
    async def run(self, target: str) -> str:
        await workflow.get_external_workflow_handle(target).signal(Holder.ping)
        try:
            await workflow.get_external_workflow_handle("no-such-workflow").signal("ping")
        except workflow.ApplicationError as err:
            return str(err)
        return "?"


@pytest.fixture
def client(bootstrap, namespace, tmp_path):
    with workflow_setup(bootstrap, namespace, tmp_path, QUEUE, [Order, Payment, Holder, Pinger],
                        partitions=PARTITIONS, name="children") as c:
        yield c


def _types(handle) -> list[str]:
    return [e["event_type"] for e in handle.fetch_history().events]


def _well_formed(handle) -> None:
    history = [(e["event_id"], EventType[e["event_type"]], e["attributes"]) for e in handle.fetch_history().events]
    assert check_well_formed(history) == []


def test_the_order_workflow_pays_with_a_child_on_another_partition(client):
    assert partition_for("order-amy", PARTITIONS) != partition_for("pay-amy", PARTITIONS)
    handle = client.start_workflow(Order.run, "amy", id="order-amy", task_queue=QUEUE)
    handle.signal(Order.add_item, "apple")
    handle.signal(Order.add_item, "pear")
    handle.signal("approve")
    assert handle.result(60) == {"items": ["apple", "pear"], "receipt": "receipt for 2 items"}
    types = _types(handle)
    assert types.index("START_CHILD_WORKFLOW_EXECUTION_INITIATED") < types.index("CHILD_WORKFLOW_EXECUTION_STARTED") \
        < types.index("CHILD_WORKFLOW_EXECUTION_COMPLETED")
    _well_formed(handle)
    child = client.get_workflow_handle("pay-amy")
    started = child.fetch_history().events[0]["attributes"]
    assert started["parent_workflow_execution"]["workflow_id"] == "order-amy"
    assert child.describe().status is WorkflowExecutionStatus.COMPLETED


def test_a_failed_child_is_a_child_workflow_error_in_the_parent(client):
    handle = client.start_workflow(Order.run, "bob", id="order-bob", task_queue=QUEUE)
    handle.signal("approve")
    assert handle.result(60) == {"items": [], "receipt": "failed: nothing to pay for"}
    assert "CHILD_WORKFLOW_EXECUTION_FAILED" in _types(handle)


@pytest.mark.parametrize("policy, child_status", [
    ("TERMINATE", WorkflowExecutionStatus.TERMINATED),
    ("REQUEST_CANCEL", WorkflowExecutionStatus.CANCELED),
    ("ABANDON", WorkflowExecutionStatus.RUNNING),
])
def test_each_parent_close_policy_reaches_down_a_chain(client, policy, child_status):
    root = f"root-{policy.lower()}"
    assert len({partition_for(n, PARTITIONS) for n in (root, f"{root}-c", f"{root}-c-c")}) == 2  # the chain crosses
    parent = client.start_workflow(Holder.run, args=[root, 2, policy], id=root, task_queue=QUEUE)
    grandchild = client.get_workflow_handle(f"{root}-c-c")
    wait_until(lambda: _exists(grandchild))
    parent.signal(Holder.release)
    assert parent.result(60) == root
    for name in (f"{root}-c", f"{root}-c-c"):
        handle = client.get_workflow_handle(name)
        wait_until(lambda: handle.describe().status is child_status)
        if child_status is WorkflowExecutionStatus.TERMINATED:
            last = handle.fetch_history().events[-1]
            assert last["attributes"]["reason"] == "by parent close policy"
        if child_status is WorkflowExecutionStatus.RUNNING:
            handle.signal(Holder.release)  # abandoned children live on, and can still finish
            assert handle.result(60) == name
        _well_formed(handle)


def test_a_workflow_signals_another_and_hears_when_the_target_is_missing(client):
    target = client.start_workflow(Holder.run, args=["target", 0, "ABANDON"], id="target", task_queue=QUEUE)
    pinger = client.start_workflow(Pinger.run, "target", id="pinger", task_queue=QUEUE)
    assert pinger.result(60) == "Unable to signal external workflow because it was not found"
    assert target.query(Holder.pings) == 1
    signaled = [e for e in target.fetch_history().events if e["event_type"] == "WORKFLOW_EXECUTION_SIGNALED"]
    assert signaled[0]["attributes"]["external_workflow_execution"]["workflow_id"] == "pinger"
    target.signal(Holder.release)
    target.result(60)


def _exists(handle) -> bool:
    try:
        handle.describe(rpc_timeout=5)
        return True
    except WorkflowFailureError:
        return False
    except Exception:  # noqa: BLE001 - not found yet
        return False
