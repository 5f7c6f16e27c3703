"""The workflows of the child-workflow crash test, loaded by worker processes by name.

A `FamilyParent` starts three `FamilyChild`ren (parent close policy TERMINATE), signals
each one, and waits until each has signalled back (through an external workflow handle);
it returns the children's results and the acknowledgements it got, duplicates included,
so a signal applied twice shows.
"""

from __future__ import annotations

from streamproc import workflow

CHILDREN = 3


@workflow.defn
class FamilyParent:
    def __init__(self) -> None:
        self.acks: list[int] = []

    @workflow.run
    async def run(self, parent_id: str) -> dict:
        handles = [await workflow.start_child_workflow(FamilyChild.run, args=[parent_id, n], id=f"{parent_id}-c{n}")
                   for n in range(CHILDREN)]
        for handle in handles:
            await handle.signal(FamilyChild.go)
        await workflow.wait_condition(lambda: len(self.acks) >= CHILDREN)
        return {"results": [await handle for handle in handles], "acks": self.acks}

    @workflow.signal
    def ack(self, n: int) -> None:
        self.acks.append(n)


@workflow.defn
class FamilyChild:
    def __init__(self) -> None:
        self.going = False

    @workflow.run
    async def run(self, parent_id: str, n: int) -> str:
        await workflow.wait_condition(lambda: self.going)
        await workflow.get_external_workflow_handle(parent_id).signal(FamilyParent.ack, n)
        return f"{parent_id}/{n}"

    @workflow.signal
    def go(self) -> None:
        self.going = True


def expected(parent_id: str) -> dict:
    return {"results": [f"{parent_id}/{n}" for n in range(CHILDREN)], "acks": list(range(CHILDREN))}
