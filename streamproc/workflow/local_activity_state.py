"""The local activities of one run, as its runtime tracks them between activations.

A call waits in `pending` until its outcome is known. On first execution the worker runs
it (`to_start`, then `resolve` with the runner's details, which also issues the marker
command). On replay its outcome is the marker recorded for its sequence number: the
instance offers each replayed task's markers, and when the code has nothing else to do
the first of them whose call is pending resolves it, one at a time in history order, as
the worker resolved them one at a time on first execution. A marker is matched by the
call's sequence number and activity type, not by its position among the task's other
commands: a changed type at the same place is a non-determinism error.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
from typing import TYPE_CHECKING, Any

from streamproc.workflow.local_activity_markers import marker_command, marker_details
from streamproc.workflow.local_activity_runner import LocalActivityRequest

if TYPE_CHECKING:
    from streamproc.workflow.runtime import WorkflowRuntime

__all__ = ["LocalActivities", "PendingLocalActivity"]


@dataclasses.dataclass(slots=True, eq=False)
class PendingLocalActivity:
    request: LocalActivityRequest
    #: The marker's details once known.
    future: asyncio.Future[dict[str, Any]]
    #: The worker's run of it, on first execution.
    job: concurrent.futures.Future[dict[str, Any]] | None = None


class LocalActivities:
    def __init__(self, runtime: WorkflowRuntime) -> None:
        self._runtime = runtime
        self.pending: dict[str, PendingLocalActivity] = {}
        #: seq -> activity type of every call made so far (replay checks markers against it).
        self._types: dict[str, str] = {}
        #: The markers of the task being replayed not yet used, in history order: seq -> details.
        self._recorded: dict[str, dict[str, Any]] = {}
        self._recorded_live = False

    def schedule(self, request: LocalActivityRequest) -> asyncio.Future[dict[str, Any]]:
        call = PendingLocalActivity(request, self._runtime.loop.create_future())
        self.pending[request.seq] = call
        self._types[request.seq] = request.activity_type
        return call.future

    def offer_markers(self, markers: list[dict[str, Any]], live: bool = False) -> None:
        """The local activity markers of the task about to be replayed; `live`: the markers
        journaled for the live task by an attempt before it, whose outcomes its answer
        records again (`engine/workflows/journaled_markers.py`)."""
        self._recorded = {str(d.get("seq")): d for d in map(marker_details, markers)}
        self._recorded_live = live

    def resolve_recorded(self) -> bool:
        """When the code is idle on replay: settle the first pending call whose marker the
        task recorded. True if one was (the code has something to run)."""
        for seq, details in self._recorded.items():
            call = self.pending.get(seq)
            if call is not None and details.get("activity_type") == call.request.activity_type:
                del self._recorded[seq]
                if self._recorded_live:
                    self._runtime.issue(marker_command(details))
                self._settle(call, details)
                return True
        return False

    def to_start(self) -> list[PendingLocalActivity]:
        """Calls that first execution must run and that are not running (a replay that
        reached the live task without their markers runs them again: at least once)."""
        return [call for call in self.pending.values() if call.job is None]

    def resolve(self, seq: str, details: dict[str, Any]) -> None:
        """First execution: the worker's outcome of `seq`, recorded with a marker command."""
        call = self.pending.get(seq)
        if call is None:
            return
        self._runtime.issue(marker_command(details))
        self._settle(call, details)

    def abandon(self, seq: str) -> None:
        """The code stopped waiting for `seq` (its handle was cancelled)."""
        call = self.pending.pop(seq, None)
        if call is not None and call.job is not None:
            call.job.cancel()

    def marker_mismatch(self, event: dict[str, Any]) -> str | None:
        """Why a recorded local activity marker is not one of this code's calls, or None."""
        details = marker_details(event)
        seq, recorded_type = str(details.get("seq")), details.get("activity_type")
        issued = self._types.get(seq)
        if issued == recorded_type:
            return None
        where = f"MarkerRecorded(event_id={event.get('event_id')}, local activity seq={seq}, " \
                f"activity_type={recorded_type!r})"
        if issued is None:
            return f"history has {where} but the workflow code made no local activity call {seq}"
        return f"activity type of {where} does not match the local activity the workflow code now calls, {issued!r}"

    def _settle(self, call: PendingLocalActivity, details: dict[str, Any]) -> None:
        del self.pending[call.request.seq]
        if not call.future.done():
            call.future.set_result(details)
