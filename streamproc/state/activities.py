"""Activities of a partition: the activity, its one armed timer, and the index of open ids.

An activity keeps the semantics' `ActivityState` (attempt, times, last failure ...) plus
what the engine needs around it (ids, task queue, input, event ids), and exactly one
armed timer: the earliest of "dispatch the next attempt" and the next timeout. The
timer may be early, never late: a heartbeat moves the real heartbeat deadline without
touching the index, and a timer that fires early is re-armed at the real deadline.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson

from streamproc.protocol.failures import failure_from_record, failure_to_record
from streamproc.protocol.wire_values import (policy_from_record, policy_to_record, timeouts_from_record,
                                            timeouts_to_record, to_datetime, to_ms)
from streamproc.semantics.activity_attempts import ActivityState
from streamproc.state.db import PartitionDb, PendingWrites
from streamproc.state.families import Family
from streamproc.state.keys import read_time_key, time_key, time_upper_bound, u64

@dataclass(frozen=True, slots=True)
class WorkflowOwner:
    """The run that scheduled an activity, and the event that scheduled it; its ids and type
    travel on the activity's tasks (`activity.info().workflow_id` ...). Activities
    scheduled before they were kept have them empty."""

    run_key: int
    scheduled_event_id: int
    workflow_id: str = ""
    run_id: str = ""
    workflow_type: str = ""

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"run_key": self.run_key, "scheduled_event_id": self.scheduled_event_id}
        if self.workflow_id:
            doc.update(workflow_id=self.workflow_id, run_id=self.run_id, workflow_type=self.workflow_type)
        return doc

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> WorkflowOwner:
        return cls(d["run_key"], d["scheduled_event_id"], d.get("workflow_id", ""), d.get("run_id", ""),
                   d.get("workflow_type", ""))


class ArmedTimer(NamedTuple):
    """The activity's one armed timer: when, what fires (DISPATCH or TIME_OUT), which
    timeout, for which attempt."""

    due_ms: int
    kind: str
    timeout_type: str
    attempt: int


@dataclass(slots=True)
class ActivityMeta:
    """What the engine keeps around an activity's `ActivityState`: its identity, where its
    tasks go, its event ids, its owner and its armed timer. Stored with the state as one
    JSON document (`to_json` writes the keys the engine has always written)."""

    activity_id: str
    activity_type: str
    task_queue: str
    input: str | None
    scheduled_event_id: int = 1
    next_event_id: int = 2
    #: The worker running the current attempt ("" while none does).
    identity: str = ""
    latest_cancel_requested_event_id: int = 0
    #: Whether the current attempt's task was published (or handed to an eager worker).
    dispatched: bool = False
    timer: ArmedTimer | None = None
    #: Set for an activity a workflow run scheduled; None for a client's.
    workflow: WorkflowOwner | None = None
    #: The request id of the START of the current attempt (a resent START is answered again).
    start_request_id: str | None = None
    #: True until first stored: its id is then indexed (if it is a client's activity).
    is_new: bool = field(default=False, repr=False)
    _has_start_request_id: bool = field(default=False, repr=False)

    def take_event_id(self) -> int:
        """The id of the activity's next event (its own history: a client's activity)."""
        event_id = self.next_event_id
        self.next_event_id += 1
        return event_id

    def attempt_started(self, identity: str, request_id: str | None) -> None:
        self.identity, self.start_request_id, self._has_start_request_id = identity, request_id, True

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "activity_id": self.activity_id, "activity_type": self.activity_type, "task_queue": self.task_queue,
            "input": self.input, "scheduled_event_id": self.scheduled_event_id, "next_event_id": self.next_event_id,
            "identity": self.identity, "latest_cancel_requested_event_id": self.latest_cancel_requested_event_id,
            "dispatched": self.dispatched, "timer": list(self.timer) if self.timer is not None else None}
        if self.workflow is not None:
            doc["workflow"] = self.workflow.to_json()
        if self._has_start_request_id:
            doc["start_request_id"] = self.start_request_id
        return doc

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ActivityMeta:
        owner = d.get("workflow")
        return cls(activity_id=d["activity_id"], activity_type=d["activity_type"], task_queue=d["task_queue"],
                   input=d["input"], scheduled_event_id=d["scheduled_event_id"], next_event_id=d["next_event_id"],
                   identity=d["identity"], latest_cancel_requested_event_id=d["latest_cancel_requested_event_id"],
                   dispatched=d["dispatched"], timer=ArmedTimer(*d["timer"]) if d.get("timer") else None,
                   workflow=WorkflowOwner.from_json(owner) if owner else None,
                   start_request_id=d.get("start_request_id"), _has_start_request_id="start_request_id" in d)


def _state_to_json(s: ActivityState) -> dict[str, Any]:
    return {"retry_policy": policy_to_record(s.retry_policy), "timeouts": timeouts_to_record(s.timeouts),
            "first_scheduled_ms": to_ms(s.first_scheduled_time), "scheduled_ms": to_ms(s.scheduled_time),
            "attempt": s.attempt,
            "started_ms": to_ms(s.started_time) if s.started_time else None,
            "last_heartbeat_ms": to_ms(s.last_heartbeat_time) if s.last_heartbeat_time else None,
            "last_heartbeat_details": s.last_heartbeat_details,
            "last_failure": failure_to_record(s.last_failure),
            "cancel_requested": s.cancel_requested}


def _state_from_json(d: dict[str, Any]) -> ActivityState:
    return ActivityState(
        retry_policy=policy_from_record(d["retry_policy"]), timeouts=timeouts_from_record(d["timeouts"]),
        first_scheduled_time=to_datetime(d["first_scheduled_ms"]), scheduled_time=to_datetime(d["scheduled_ms"]),
        attempt=d["attempt"],
        started_time=to_datetime(d["started_ms"]) if d["started_ms"] is not None else None,
        last_heartbeat_time=to_datetime(d["last_heartbeat_ms"]) if d["last_heartbeat_ms"] is not None else None,
        last_heartbeat_details=d["last_heartbeat_details"],
        last_failure=failure_from_record(d["last_failure"]),
        cancel_requested=d["cancel_requested"])


class Activities:
    """Activity reads and writes for processors; every method keeps the indexes consistent."""

    def __init__(self, writes: PendingWrites) -> None:
        self._w = writes

    def get(self, key: int) -> tuple[ActivityMeta, ActivityState] | None:
        raw = self._w.get(Family.ACTIVITIES, u64(key))
        if raw is None:
            return None
        stored = orjson.loads(raw)
        return ActivityMeta.from_json(stored["meta"]), _state_from_json(stored["state"])

    def key_of(self, activity_id: str) -> int | None:
        raw = self._w.get(Family.ACTIVITY_IDS, activity_id.encode())
        return int(raw) if raw is not None else None

    def put(self, key: int, meta: ActivityMeta, state: ActivityState) -> None:
        # Ids of activities owned by a workflow run are unique within the run (the run
        # checks), not in the partition: they are "1", "2", ... in every run.
        if meta.is_new and meta.workflow is None:
            self._w.put(Family.ACTIVITY_IDS, meta.activity_id.encode(), str(key).encode())
        meta.is_new = False
        self._w.put(Family.ACTIVITIES, u64(key),
                    orjson.dumps({"meta": meta.to_json(), "state": _state_to_json(state)}))

    def arm(self, key: int, meta: ActivityMeta, timer: ArmedTimer | None) -> None:
        """Make `timer` the activity's one armed timer."""
        old = meta.timer
        if old is not None and (timer is None or old.due_ms != timer.due_ms):
            self._w.delete(Family.ACTIVITY_TIMERS, time_key(old.due_ms, key))
        if timer is not None:
            self._w.put(Family.ACTIVITY_TIMERS, time_key(timer.due_ms, key), b"")
        meta.timer = timer

    def remove(self, key: int, meta: ActivityMeta) -> None:
        """The activity closed: forget it, its timer and its id."""
        self.arm(key, meta, None)
        if meta.workflow is None:
            self._w.delete(Family.ACTIVITY_IDS, meta.activity_id.encode())
        self._w.delete(Family.ACTIVITIES, u64(key))


class ActivityTimers:
    """Read-only view of committed activity timers for the checker."""

    def __init__(self, db: PartitionDb) -> None:
        self._db = db

    def due(self, now_ms: int, limit: int) -> list[tuple[int, int]]:
        """(due_ms, activity key) of timers due now or earlier, in time order."""
        return [read_time_key(k) for k, _ in self._db.scan(Family.ACTIVITY_TIMERS, time_upper_bound(now_ms + 1), limit)]

    def timer_of(self, key: int) -> list | None:
        raw = self._db.get(Family.ACTIVITIES, u64(key))
        return orjson.loads(raw)["meta"].get("timer") if raw is not None else None

    def any_attempt_out(self) -> bool:
        """Whether some activity has an attempt dispatched (on its task queue, or running):
        one waiting out a retry backoff has not. Reads every open activity: a dispatched
        attempt with only a start-to-close timeout has no timer until it starts."""
        return any(orjson.loads(raw)["meta"]["dispatched"] for _, raw in self._db.scan(Family.ACTIVITIES))

    def next_due_ms(self) -> int | None:
        first = self._db.first_key(Family.ACTIVITY_TIMERS)
        return read_time_key(first)[0] if first is not None else None


__all__ = ["Activities", "ActivityMeta", "ActivityTimers", "ArmedTimer", "WorkflowOwner"]
