"""The issue's `Order` workflow, driven by signals, read by queries, changed by updates;
shared by the SDK tests (replayed from hand-written histories) and the broker tests."""

from __future__ import annotations

from datetime import timedelta

from streamproc import workflow


@workflow.defn
class Order:
    def __init__(self) -> None:
        self.items: list[str] = []
        self.approved = False
        #: What the run method saw first: signals recorded before the first task run before it.
        self.seen_at_start: list[str] | None = None

    @workflow.run
    async def run(self, customer: str) -> dict:
        self.seen_at_start = list(self.items)
        await workflow.wait_condition(lambda: self.approved, timeout=timedelta(days=3))
        return {"customer": customer, "items": self.items}

    @workflow.signal
    def add_item(self, item: str) -> None:
        self.items.append(item)

    @workflow.signal(name="approve")
    async def approve(self) -> None:
        self.approved = True

    @workflow.query
    def count(self) -> int:
        return len(self.items)

    @workflow.query(name="first")
    def first_item(self) -> str:
        return self.items[0]

    @workflow.query
    def broken(self) -> int:
        raise ValueError("no answer today")

    @workflow.query
    def sneaky(self) -> None:
        workflow.start_activity("charge", start_to_close_timeout=timedelta(seconds=5))

    @workflow.update
    async def remove_item(self, item: str) -> int:
        self.items.remove(item)
        return len(self.items)

    @remove_item.validator
    def _check(self, item: str) -> None:
        if item not in self.items:
            raise ValueError(f"no item {item}")
