"""Workflow runs of a partition, and the indexes that find them.

A run is a `WorkflowRun` (`workflow_run.py`: what the engine needs to process its next
command), stored as one JSON document; its history lives apart in `History`. A workflow id names its *current* run
(the newest, open or closed: the reuse policies look at it); a run id names its run.
Closed runs stay, so DESCRIBE and GET_HISTORY answer for them too.
"""

from __future__ import annotations

import orjson

from streamproc.state.db import PendingWrites
from streamproc.state.families import Family
from streamproc.state.keys import u64
from streamproc.state.workflow_run import WorkflowRun

#: Enum members looked up once (a member's lookup on its class is a Python call per use).
_RUNS = Family.WORKFLOW_RUNS
_IDS, _RUN_IDS = Family.WORKFLOW_IDS, Family.WORKFLOW_RUN_IDS


class Workflows:
    def __init__(self, writes: PendingWrites) -> None:
        self._w = writes

    def get(self, run_key: int) -> WorkflowRun | None:
        if run_key < 0:
            return None
        key = u64(run_key)
        raw = self._w.get(_RUNS, key)
        if raw is None:
            return None
        # The run the last command stored, as it stored it: not decoded again.
        run = self._w.take_decoded(_RUNS, key, raw)
        return run if run is not None else WorkflowRun.from_json(orjson.loads(raw))

    def put(self, run_key: int, run: WorkflowRun) -> None:
        self._w.put(_RUNS, u64(run_key), orjson.dumps(run.to_json()), decoded=run)

    def add(self, run_key: int, run: WorkflowRun) -> None:
        """A new run: stored, findable by its run id, and the current run of its workflow id."""
        self._w.put(_RUN_IDS, run.run_id.encode(), u64(run_key))
        self._w.put(_IDS, run.workflow_id.encode(), u64(run_key))
        self.put(run_key, run)

    def current_key(self, workflow_id: str) -> int | None:
        raw = self._w.get(_IDS, workflow_id.encode())
        return int.from_bytes(raw, "big") if raw is not None else None

    def run_key_of(self, run_id: str) -> int | None:
        raw = self._w.get(_RUN_IDS, run_id.encode())
        return int.from_bytes(raw, "big") if raw is not None else None

    def find(self, workflow_id: str, run_id: str = "") -> tuple[int, WorkflowRun] | None:
        """The run `run_id` of `workflow_id`, or its current run when `run_id` is empty."""
        if run_id:
            run_key = self.run_key_of(run_id)
        else:
            run_key = self.current_key(workflow_id)
        run = self.get(run_key) if run_key is not None else None
        if run is None or run.workflow_id != workflow_id:
            return None
        return run_key, run

    # signals ------------------------------------------------------------------------------
    def signal_recorded(self, run_key: int, request_id: str) -> bool:
        """Whether the run already recorded a signal sent with `request_id`."""
        return bool(request_id) and self._w.get(Family.WORKFLOW_SIGNAL_REQUESTS, _request_key(run_key, request_id)) is not None

    def record_signal_request(self, run_key: int, request_id: str) -> None:
        """Remember `request_id` so that the same signal sent again is not applied twice.
        Kept as long as the run (and its history) is kept."""
        if request_id:
            self._w.put(Family.WORKFLOW_SIGNAL_REQUESTS, _request_key(run_key, request_id), b"")


def _request_key(run_key: int, request_id: str) -> bytes:
    return u64(run_key) + request_id.encode()
