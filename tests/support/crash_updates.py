"""A workflow that adds up what updates and signals bring, loaded by worker processes by
name, and the client side that sends them across SIGKILLs: for the update crash test.

`Tally` records the name of each update and signal it applies, so one applied twice (or
lost) shows in its result as well as in its total. `send_all` sends a workflow's updates
one after another, then its signals, then `finish`, as a careful caller does: a request
whose outcome is unknown is sent again under the same update id or request id, which the
engine applies once.
"""

from __future__ import annotations

import time

from streamproc import workflow
from streamproc.client import SyncClient
from streamproc.delivery_errors import RequestNotSentError, RequestOutcomeUnknownError

UPDATES_EACH = 4
SIGNALS_EACH = 3
#: Sends of one request, counting the first, before the test gives up on it.
TRIES = 6


@workflow.defn
class Tally:
    def __init__(self) -> None:
        self.total = 0
        self.applied: list[str] = []
        self.done = False

    @workflow.run
    async def run(self, workflow_id: str) -> dict:
        await workflow.wait_condition(lambda: self.done)
        return {"total": self.total, "applied": self.applied}

    @workflow.update
    async def add(self, name: str, amount: int) -> int:
        self.total += amount
        self.applied.append(name)
        return self.total

    @workflow.signal
    def bump(self, name: str, amount: int) -> None:
        self.total += amount
        self.applied.append(name)

    @workflow.signal
    def finish(self) -> None:
        self.done = True


def update_amount(k: int) -> int:
    return k + 1


def signal_amount(k: int) -> int:
    return 100 * (k + 1)


def expected_total() -> int:
    return sum(map(update_amount, range(UPDATES_EACH))) + sum(map(signal_amount, range(SIGNALS_EACH)))


def expected_names() -> list[str]:
    return [f"u{k}" for k in range(UPDATES_EACH)] + [f"s{k}" for k in range(SIGNALS_EACH)]


def send_all(client: SyncClient, workflow_id: str, give_ups: list[str], pause_s: float = 0.0) -> list[int]:
    """Every update of `workflow_id` in turn, its signals, then `finish`, `pause_s` apart;
    returns what each update answered (the total after it). Each sent again under the same
    id while its outcome is unknown (the engine or the broker away); each give-up kept in
    `give_ups`."""
    handle = client.get_workflow_handle(workflow_id)
    answers = [_again(lambda k=k: handle.execute_update(Tally.add, args=[f"u{k}", update_amount(k)],
                                                        id=f"{workflow_id}/u{k}", rpc_timeout=20),
                      f"{workflow_id} u{k}", give_ups, pause_s)
               for k in range(UPDATES_EACH)]
    for k in range(SIGNALS_EACH):
        _again(lambda k=k: handle.signal(Tally.bump, args=[f"s{k}", signal_amount(k)],
                                         request_id=f"{workflow_id}/s{k}", rpc_timeout=20),
               f"{workflow_id} s{k}", give_ups, pause_s)
    _again(lambda: handle.signal(Tally.finish, request_id=f"{workflow_id}/finish", rpc_timeout=20),
           f"{workflow_id} finish", give_ups, pause_s)
    return answers


def _again(call, what: str, give_ups: list[str], pause_s: float):
    time.sleep(pause_s)
    for n in range(TRIES):
        try:
            return call()
        except (RequestOutcomeUnknownError, RequestNotSentError) as exc:
            give_ups.append(f"{what}: {type(exc).__name__}")
            if n == TRIES - 1:
                raise
            time.sleep(0.5)
