"""Schedules of a partition (Temporal's Schedules, SEMANTICS.md 8), and their due times.

A schedule is one JSON document in `schedules`, keyed by its id (it lives on the
partition of its id). Its next action time is one key in `schedule_due`
(due_ms, schedule id), so the checker's range scan wakes only for what is due: a
partition holding a million idle schedules reads nothing until one of them is.

`StoredSchedule` is what the engine needs to take the next action: the definition
(action, compiled spec, policies, state) and the running record of it (counters,
recent actions, running workflows, buffered starts, how far automatic actions were
considered). Fields are stored only when they differ from their defaults.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson

from streamproc.state.db import PartitionDb, PendingWrites
from streamproc.state.families import Family
from streamproc.state.keys import read_u64, time_upper_bound, u64

#: Recent actions a description shows (Temporal: 10).
RECENT_ACTIONS = 10
#: Enum members looked up once (a member's lookup on its class is a Python call per use).
_SCHEDULES, _SCHEDULE_DUE = Family.SCHEDULES, Family.SCHEDULE_DUE


@dataclasses.dataclass
class RecentAction:
    nominal_ms: int
    actual_ms: int
    #: When the start was sent (the engine's clock).
    start_ms: int
    workflow_id: str
    run_id: str = ""
    #: RUNNING until the workflow's partition answers; then its close status, or START_FAILED.
    status: str = "RUNNING"
    manual: bool = False


@dataclasses.dataclass
class StoredSchedule:
    schedule_id: str
    #: The StartWorkflow action: workflow_type, workflow_id (the base of each run's id),
    #: task_queue, input, timeouts, retry_policy, memo, search_attributes.
    action: dict[str, Any]
    #: The compiled spec (`CompiledSpec.to_dict()`) as JSON text: a pass reads the document
    #: and writes it whole, and looks the compiled spec up by this text; parsing and writing
    #: it as a dict was most of the JSON work of a pass. `spec` decodes it.
    spec_json: str
    #: {overlap: policy name, catchup_window_ms, pause_on_failure}
    policy: dict[str, Any]
    create_ms: int
    update_ms: int
    paused: bool = False
    note: str = ""
    limited_actions: bool = False
    remaining_actions: int = 0
    #: The CREATE's request id: the same CREATE sent again is answered, not refused.
    request_id: str = ""
    memo: dict[str, Any] | None = None
    search_attributes: dict[str, Any] | None = None
    #: Updates so far: the conflict token an UPDATE may name.
    conflict_token: int = 0
    action_count: int = 0
    missed_catchup_window: int = 0
    overlap_skipped: int = 0
    buffer_dropped: int = 0
    recent: list[RecentAction] = dataclasses.field(default_factory=list)
    #: Workflows started and not closed yet: [{workflow_id, run_id}] (ALLOW_ALL ones excluded).
    running: list[dict[str, str]] = dataclasses.field(default_factory=list)
    #: Starts waiting for their turn: [{nominal_ms, actual_ms, overlap, manual}].
    buffer: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    #: Backfills not yet evaluated to the end: [{after_ms, end_ms, overlap}].
    backfills: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    #: Automatic actions up to this time were considered (taken, skipped or missed).
    processed_ms: int = 0
    #: The due time armed in `schedule_due`, or None.
    due_ms: int | None = None
    #: The last successful workflow's result (a JSON payload), and the last failure since.
    last_completion_result: str | None = None
    last_failure: dict[str, Any] | None = None

    @property
    def spec(self) -> dict[str, Any]:
        """The compiled spec as a dict (a new one each time: for DESCRIBE and the like)."""
        return orjson.loads(self.spec_json)

    @spec.setter
    def spec(self, spec: dict[str, Any]) -> None:
        self.spec_json = orjson.dumps(spec).decode()

    def record_action(self, action: RecentAction) -> None:
        self.recent.append(action)
        del self.recent[:-RECENT_ACTIONS]

    def find_recent(self, workflow_id: str) -> RecentAction | None:
        for action in reversed(self.recent):
            if action.workflow_id == workflow_id:
                return action
        return None

    def to_json(self) -> dict[str, Any]:
        fields = self.__dict__  # read directly: a getattr per field was a third of the cost
        out = {name: value for name, default in _STORED_DEFAULTS
               if (value := fields[name]) != default}  # a required field's default is _REQUIRED: always stored
        if "recent" in out:
            out["recent"] = [vars(a).copy() for a in out["recent"]]
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> StoredSchedule:
        """The stored document (from `to_json`): its fields over the defaults, set directly
        (the generated `__init__` of 31 arguments was most of a TRIGGER's read)."""
        if "spec" in d:  # stored before the spec was kept as text
            d = {**d, "spec_json": orjson.dumps(d["spec"]).decode()}
            del d["spec"]
        if not _REQUIRED_FIELDS <= d.keys() <= _FIELDS:
            raise TypeError(f"not a stored schedule: missing {sorted(_REQUIRED_FIELDS - d.keys())}, "
                            f"unknown {sorted(d.keys() - _FIELDS)}")
        schedule = cls.__new__(cls)
        fields = schedule.__dict__
        fields.update(_SCALAR_DEFAULTS)
        fields.update(recent=[], running=[], buffer=[], backfills=[])  # each its own list
        fields.update(d)
        if "recent" in d:
            fields["recent"] = [RecentAction(**a) for a in d["recent"]]
        return schedule


_REQUIRED = object()
#: (field, default) of the stored document, in order: read once, not per document.
_STORED_DEFAULTS = tuple(
    (f.name, f.default_factory() if f.default_factory is not dataclasses.MISSING
     else _REQUIRED if f.default is dataclasses.MISSING else f.default)
    for f in dataclasses.fields(StoredSchedule))
_FIELDS = frozenset(name for name, _ in _STORED_DEFAULTS)
_REQUIRED_FIELDS = frozenset(name for name, default in _STORED_DEFAULTS if default is _REQUIRED)
#: The defaults that are no list (those are made anew for each schedule).
_SCALAR_DEFAULTS = {name: default for name, default in _STORED_DEFAULTS
                    if default is not _REQUIRED and not isinstance(default, list)}
if {name for name, default in _STORED_DEFAULTS if isinstance(default, list)} != {
        "recent", "running", "buffer", "backfills"} or not all(
        isinstance(default, (type(None), bool, int, str)) for default in _SCALAR_DEFAULTS.values()):
    raise RuntimeError("StoredSchedule's defaults are not the ones from_json sets")


def _due_key(due_ms: int, schedule_id: str) -> bytes:
    return u64(due_ms) + schedule_id.encode()


class Schedules:
    """Schedules of the partition, for processors: read, store, delete, arm the next action."""

    def __init__(self, writes: PendingWrites) -> None:
        self._w = writes

    def get(self, schedule_id: str) -> StoredSchedule | None:
        raw = self._w.get(_SCHEDULES, schedule_id.encode())
        return StoredSchedule.from_json(orjson.loads(raw)) if raw is not None else None

    def put(self, schedule: StoredSchedule) -> None:
        self._w.put(_SCHEDULES, schedule.schedule_id.encode(), orjson.dumps(schedule.to_json()))

    def delete(self, schedule: StoredSchedule) -> None:
        self.disarm(schedule)
        self._w.delete(Family.SCHEDULES, schedule.schedule_id.encode())

    def arm(self, schedule: StoredSchedule, due_ms: int | None) -> None:
        """Make `due_ms` the schedule's next wake-up (None: none)."""
        if schedule.due_ms == due_ms:
            return
        self.disarm(schedule)
        if due_ms is not None:
            self._w.put(_SCHEDULE_DUE, _due_key(due_ms, schedule.schedule_id), b"")
            schedule.due_ms = due_ms

    def disarm(self, schedule: StoredSchedule) -> None:
        if schedule.due_ms is not None:
            self._w.delete(_SCHEDULE_DUE, _due_key(schedule.due_ms, schedule.schedule_id))
            schedule.due_ms = None

    def committed(self, limit: int, after_id: str = "") -> list[StoredSchedule]:
        """Committed schedules in id order, starting after `after_id` (for LIST)."""
        db = self._w.db
        out = []
        lower = after_id.encode() + b"\x00" if after_id else None
        for _, raw in db.scan(Family.SCHEDULES, limit=limit, lower_bound=lower):
            out.append(StoredSchedule.from_json(orjson.loads(raw)))
        return out


class ScheduleDueDates:
    """Read-only view of committed schedule due times, for the checker."""

    def __init__(self, db: PartitionDb) -> None:
        self._db = db

    def due(self, now_ms: int, limit: int) -> list[tuple[int, str]]:
        """(due_ms, schedule id) due now or earlier, in time order."""
        return [(read_u64(key[:8]), key[8:].decode())
                for key, _ in self._db.scan(Family.SCHEDULE_DUE, time_upper_bound(now_ms + 1), limit)]

    def next_due_ms(self) -> int | None:
        first = self._db.first_key(Family.SCHEDULE_DUE)
        return None if first is None else read_u64(first[:8])
