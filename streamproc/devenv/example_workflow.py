"""The workflow dev mode runs: an order that reserves, waits a durable timer, then charges."""

from __future__ import annotations

from datetime import timedelta

from streamproc import activity, workflow

EXAMPLE_WORKFLOW_QUEUE = "orders"
STEP_TIMEOUT = timedelta(seconds=30)


@activity.defn
def reserve(order_id: str) -> str:
    return f"reservation-{order_id}"


@activity.defn
def charge(order_id: str, reservation: str) -> dict:
    attempt = activity.info().attempt
    if attempt == 1:  # the first attempt fails, to show a retry in the events
        raise activity.ApplicationError("card network busy", type="Transient")
    return {"order": order_id, "reservation": reservation, "charged": True, "attempt": attempt}


@workflow.defn
class OrderWorkflow:
    @workflow.run
    async def run(self, order_id: str) -> dict:
        reservation = await workflow.execute_activity(reserve, order_id, start_to_close_timeout=STEP_TIMEOUT)
        await workflow.sleep(timedelta(seconds=2))  # a durable timer: survives any restart
        return await workflow.execute_activity(
            charge, args=[order_id, reservation], start_to_close_timeout=STEP_TIMEOUT,
            retry_policy=workflow.RetryPolicy(initial_interval=timedelta(milliseconds=500)))
