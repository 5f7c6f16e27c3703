"""Activities of a partition: the activity, its one armed timer, and the index of open ids.

An activity keeps the semantics' `ActivityState` (attempt, times, last failure ...) plus
what the engine needs around it (ids, task queue, input, event ids), and exactly one
armed timer: the earliest of "dispatch the next attempt" and the next timeout. The
timer may be early, never late: a heartbeat moves the real heartbeat deadline without
touching the index, and a timer that fires early is re-armed at the real deadline.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import orjson

from streamproc.protocol.failures import failure_from_record, failure_to_record
from streamproc.protocol.wire_values import (policy_from_record, policy_to_record, timeouts_from_record,
                                            timeouts_to_record, to_datetime, to_ms)
from streamproc.semantics.activity_attempts import ActivityState
from streamproc.state.db import PartitionDb, PendingWrites
from streamproc.state.families import Family
from streamproc.state.keys import read_time_key, time_key, time_upper_bound, u64

Activity = dict[str, Any]


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

    def get(self, key: int) -> tuple[Activity, ActivityState] | None:
        raw = self._w.get(Family.ACTIVITIES, u64(key))
        if raw is None:
            return None
        stored = orjson.loads(raw)
        return stored["meta"], _state_from_json(stored["state"])

    def key_of(self, activity_id: str) -> int | None:
        raw = self._w.get(Family.ACTIVITY_IDS, activity_id.encode())
        return int(raw) if raw is not None else None

    def put(self, key: int, meta: Activity, state: ActivityState) -> None:
        # Ids of activities owned by a workflow run are unique within the run (the run
        # checks), not in the partition: they are "1", "2", ... in every run.
        if meta.pop("new", False) and meta.get("workflow") is None:
            self._w.put(Family.ACTIVITY_IDS, meta["activity_id"].encode(), str(key).encode())
        self._w.put(Family.ACTIVITIES, u64(key), orjson.dumps({"meta": meta, "state": _state_to_json(state)}))

    def arm(self, key: int, meta: Activity, timer: tuple[int, str, str, int] | None) -> None:
        """Make `timer` (due_ms, kind, timeout type, attempt) the activity's one armed timer."""
        old = meta.get("timer")
        if old is not None and (timer is None or old[0] != timer[0]):
            self._w.delete(Family.ACTIVITY_TIMERS, time_key(old[0], key))
        if timer is not None:
            self._w.put(Family.ACTIVITY_TIMERS, time_key(timer[0], key), b"")
        meta["timer"] = list(timer) if timer is not None else None

    def remove(self, key: int, meta: Activity) -> None:
        """The activity closed: forget it, its timer and its id."""
        self.arm(key, meta, None)
        if meta.get("workflow") is None:
            self._w.delete(Family.ACTIVITY_IDS, meta["activity_id"].encode())
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

    def next_due_ms(self) -> int | None:
        first = self._db.first_key(Family.ACTIVITY_TIMERS)
        return read_time_key(first)[0] if first is not None else None


__all__ = ["Activities", "ActivityTimers", "replace", "to_datetime", "to_ms"]
