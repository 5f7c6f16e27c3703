"""Waiting for a run's result on our own replies partition (docs/workflow-protocol.md,
"Waiting for the result").

A START this client sends names a `close_reply`: our replies partition and a request id
registered before the START goes out (`CloseWaiter`). The engine sends the run's close
event there in the transaction that closes it, and each close of the chain that follows
(continue-as-new, retry, cron), so `handle.result()` for a run we started reads no events
topic: the answer is one record on the partition we read anyway. A handle on a run started
elsewhere (or one whose waiter lapsed) sends WAIT_RESULT with a new close request id and
waits the same way; the engine answers at once when the run is closed.

What the engine cannot answer falls back to reading the events topic (`ScanFrom`): a run
gone from the engine's state (NOT_FOUND) or one with as many waiters as it keeps
(RESOURCE_EXHAUSTED). A waiter registered at start is kept STARTER_WAIT_S seconds for a
`result()` that may never come; a later `result()` asks with WAIT_RESULT instead.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
import uuid
from collections import deque
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import orjson

from streamproc.client.errors import RequestNotSentError, RequestOutcomeUnknownError
from streamproc.client.workflow_events import WorkflowEvent, workflow_event
from streamproc.protocol.records import RecordType, RejectionType, WorkflowIntent

if TYPE_CHECKING:
    from streamproc.kafka.replies import Reply, ReplyListener

__all__ = ["CloseWaiter", "ScanFrom", "last_close", "STARTER_WAIT_S"]

#: How long the close of a run we started is listened for before `result()` is called.
STARTER_WAIT_S = 300.0
#: The longest one WAIT_RESULT waits for its acknowledgement before it is sent again.
WAIT_RESULT_RPC_S = 30.0
#: Refusals that mean "the engine cannot tell": read the events topic instead.
_SCAN_INSTEAD = frozenset({RejectionType.NOT_FOUND, RejectionType.RESOURCE_EXHAUSTED,
                           RejectionType.UNKNOWN_COMMAND})


class CloseWaiter:
    """The close events the engine sends to one request id of our replies partition, kept
    in arrival order until awaited; any event loop may await them."""

    def __init__(self, listener: ReplyListener, ttl_s: float) -> None:
        self.request_id = uuid.uuid4().hex
        self.partition = listener.partition
        self._listener = listener
        self._lock = threading.Lock()
        self._closes: deque[WorkflowEvent] = deque()
        self._arrived: Future = Future()
        listener.expect(self.request_id, self._on_reply, ttl_s)

    def target(self, follow_runs: bool = True) -> dict[str, Any]:
        """The `close_reply` value of a START or WAIT_RESULT."""
        return {"partition": self.partition, "request_id": self.request_id, "follow_runs": follow_runs}

    def _on_reply(self, reply: Reply) -> bool:
        event = workflow_event(reply.record)
        if event is not None and event.is_close:
            with self._lock:
                self._closes.append(event)
                if not self._arrived.done():
                    self._arrived.set_result(None)
        return False  # a chain sends each of its closes: listen on

    def keep(self, ttl_s: float) -> bool:
        """Listen `ttl_s` more; False if it lapsed meanwhile (a close may have been missed)."""
        return self._listener.extend(self.request_id, ttl_s)

    async def next(self, deadline: float | None) -> WorkflowEvent:
        """The next close sent to us; TimeoutError at `deadline` (monotonic; None: never)."""
        while True:
            with self._lock:
                if self._closes:
                    return self._closes.popleft()
                if self._arrived.done():
                    self._arrived = Future()
                arrived = self._arrived
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise TimeoutError(f"no close of the run within the result's timeout (request id {self.request_id})")
            try:
                await asyncio.wait_for(asyncio.wrap_future(arrived), remaining)
            except TimeoutError:
                continue  # the loop raises, unless a close arrived just now

    def close(self) -> None:
        self._listener.forget(self.request_id)


@dataclasses.dataclass(frozen=True)
class ScanFrom:
    """The engine cannot answer: read the events topic for the close of `run_id` ("" = the current run)."""

    run_id: str


async def last_close(handle: Any, deadline: float | None, follow_runs: bool) -> WorkflowEvent | ScanFrom:
    """The close event `handle.result()` answers with (the chain's last, when following
    runs), from our replies partition; or where to read the events topic instead."""
    run_id = handle.result_run_id or ""
    waiter: CloseWaiter | None = handle.take_close_waiter()
    if waiter is not None and not waiter.keep(_ttl(deadline)):
        waiter.close()
        waiter = None
    answered_at_once = False
    try:
        while True:
            if waiter is None:
                asked = await _ask(handle, run_id, follow_runs, deadline)
                if isinstance(asked, ScanFrom):
                    return asked
                waiter, run_id, answered_at_once = asked
            event = await waiter.next(deadline)
            if event.run_id != run_id:
                continue
            next_run = event.attributes.get("new_execution_run_id") or ""
            if not (next_run and follow_runs):
                return event
            run_id = next_run
            if answered_at_once:
                # The engine followed the chain as far as its state holds it: ask about the next run.
                waiter.close()
                waiter = None
    finally:
        if waiter is not None:
            waiter.close()


async def _ask(handle: Any, run_id: str, follow_runs: bool,
               deadline: float | None) -> tuple[CloseWaiter, str, bool] | ScanFrom:
    """WAIT_RESULT for `run_id`: a registered waiter, the run it waits on and whether that
    was closed already; or ScanFrom when the engine cannot answer."""
    requests = handle.requests
    waiter = await requests.close_waiter(_ttl(deadline), _rpc_timeout(deadline))
    try:
        while True:
            try:
                reply = await requests.request(
                    WorkflowIntent.WAIT_RESULT, {"workflow_id": handle.id, "run_id": run_id,
                                                 "close_reply": waiter.target(follow_runs)},
                    _rpc_timeout(deadline), accept=lambda r: r.intent == WorkflowIntent.RESULT_WAIT_ACCEPTED)
                break
            except (RequestOutcomeUnknownError, RequestNotSentError):
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError(f"no answer about workflow {handle.id!r} within the result's timeout") from None
                # The broker is away: ask again (one waiter per close request id, however often).
    except BaseException:
        waiter.close()
        raise
    record = reply.record
    if record.record_type is RecordType.COMMAND_REJECTION:
        waiter.close()
        if record.rejection_type in _SCAN_INSTEAD:
            return ScanFrom(run_id)
        raise handle.rejection(record)
    attributes = orjson.loads(record.value["attributes"] or "{}")
    return waiter, attributes["run_id"], attributes["closed"]


def _ttl(deadline: float | None) -> float:
    """How long to listen: until the deadline (and a little), or as long as it takes."""
    return 10.0 ** 9 if deadline is None else max(deadline - time.monotonic(), 0) + 60


def _rpc_timeout(deadline: float | None) -> float:
    if deadline is None:
        return WAIT_RESULT_RPC_S
    return max(min(WAIT_RESULT_RPC_S, deadline - time.monotonic()), 0.1)
