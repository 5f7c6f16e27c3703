"""Three deployments of one workflow type, "Shipment", for the non-determinism tests.

v1 packs, sleeps, ships. v2 prints a label first: unguarded (`ShipmentV2Broken`) it
contradicts every history v1 recorded; behind `workflow.patched` (`ShipmentV2Fixed`) runs
that v1 started keep v1's path and new runs take the label path.
"""

from __future__ import annotations

from datetime import timedelta

from streamproc import activity, workflow

WORKFLOW_TYPE = "Shipment"
ACTIVITY_TIMEOUT = timedelta(seconds=30)
NAP = timedelta(hours=6)
LABEL_FIRST = "label-first"


@activity.defn
def pack(order_id: str) -> str:
    return f"parcel-{order_id}"


@activity.defn
def label(order_id: str) -> str:
    return f"label-{order_id}"


@activity.defn
def ship(parcel: str) -> str:
    return f"shipped-{parcel}"


ACTIVITIES = [pack, label, ship]


async def _pack_nap_ship(order_id: str) -> str:
    parcel = await workflow.execute_activity(pack, order_id, start_to_close_timeout=ACTIVITY_TIMEOUT)
    await workflow.sleep(NAP)
    return await workflow.execute_activity(ship, parcel, start_to_close_timeout=ACTIVITY_TIMEOUT)


@workflow.defn(name=WORKFLOW_TYPE)
class ShipmentV1:
    @workflow.run
    async def run(self, order_id: str) -> str:
        return await _pack_nap_ship(order_id)


@workflow.defn(name=WORKFLOW_TYPE)
class ShipmentV2Broken:
    """Prints the label before packing: incompatible with every run v1 started."""

    @workflow.run
    async def run(self, order_id: str) -> str:
        await workflow.execute_activity(label, order_id, start_to_close_timeout=ACTIVITY_TIMEOUT)
        return await _pack_nap_ship(order_id)


@workflow.defn(name=WORKFLOW_TYPE)
class ShipmentV2Fixed:
    """The same change behind a patch."""

    @workflow.run
    async def run(self, order_id: str) -> str:
        if workflow.patched(LABEL_FIRST):
            await workflow.execute_activity(label, order_id, start_to_close_timeout=ACTIVITY_TIMEOUT)
        return await _pack_nap_ship(order_id)
