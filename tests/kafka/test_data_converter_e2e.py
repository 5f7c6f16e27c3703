"""A custom data converter end to end on a real broker: client -> workflow -> activity ->
result, with a value JSON cannot hold (Decimal money) travelling tagged "text/money"."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import orjson
import pytest

from streamproc import activity, workflow
from streamproc.activity.errors import ApplicationError
from streamproc.client import Client
from streamproc.clock import ManualClock
from streamproc.converter import PayloadEncodingError
from streamproc.settings import Settings
from streamproc.worker import Worker
from tests.support.engines import EngineThread
from tests.support.money_converter import WITH_MONEY, Money

pytestmark = pytest.mark.kafka

QUEUE = "billing"
# User data that looks like the converter's envelope: must arrive as this very dict.
LOOKALIKE = {"metadata": {"encoding": "binary/plain"}, "data": "AAEC"}


@activity.defn
def add_tax(price: Money, note: dict, receipt: bytes) -> Money:
    if not isinstance(price, Money) or note != LOOKALIKE or receipt != b"\x00\xff":
        raise ApplicationError(f"arguments arrived changed: {price!r} {note!r} {receipt!r}",
                               non_retryable=True)
    return Money(price.amount * Decimal("1.21"), price.currency)


@workflow.defn
class Invoice:
    @workflow.run
    async def run(self, price: Money, note: dict) -> Money:
        return await workflow.execute_activity(add_tax, args=[price, note, b"\x00\xff"],
                                               start_to_close_timeout=timedelta(seconds=30))


def test_a_custom_converter_carries_values_through_workflow_and_activity(bootstrap, namespace, tmp_path):
    settings = Settings(bootstrap=bootstrap, namespace=namespace, partitions=2,
                        state_dir=tmp_path, engine_id="converter")
    with EngineThread(settings, clock=ManualClock(), idle_poll_ms=10), \
            Client(bootstrap, namespace, data_converter=WITH_MONEY) as client, \
            Worker(client, task_queue=QUEUE, workflows=[Invoice], activities=[add_tax]):
        handle = client.start_workflow(Invoice.run, args=[Money(Decimal("10.00"), "EUR"), LOOKALIKE],
                                       id="invoice-1", task_queue=QUEUE)
        assert handle.result(timeout=60) == Money(Decimal("12.1000"), "EUR")

        # On the wire: the tagged envelope for money, the escaped look-alike, plain JSON otherwise.
        events = {e["event_type"]: e["attributes"] for e in handle.fetch_history().events}
        started_input = orjson.loads(events["WORKFLOW_EXECUTION_STARTED"]["input"])
        assert started_input[0] == {"metadata": {"encoding": "text/money"}, "data": "RVVSIDEwLjAw"}
        assert started_input[1]["metadata"] == {"encoding": "json/plain"}
        activity_input = orjson.loads(events["ACTIVITY_TASK_SCHEDULED"]["input"])
        assert [a["metadata"]["encoding"] for a in activity_input] == ["text/money", "json/plain", "binary/plain"]

        # A client without the converter cannot read the result, and says why.
        with Client(bootstrap, namespace) as plain:
            with pytest.raises(PayloadEncodingError, match="'text/money' has no converter"):
                plain.get_workflow_handle("invoice-1").result(timeout=60)
