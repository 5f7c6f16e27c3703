"""A stored schedule reads back as the object that wrote it, whatever fields differ from
their defaults, and a document that is no schedule is refused, not half read."""

from __future__ import annotations

import orjson
import pytest

from streamproc.state.schedules import RecentAction, StoredSchedule


def _schedule(**changes) -> StoredSchedule:
    return StoredSchedule(schedule_id="s", action={"workflow_id": "w", "workflow_type": "T", "task_queue": "q"},
                          spec_json='{"interval":[{"interval_ms":1000,"phase_ms":0}]}',
                          policy={"overlap": "SKIP", "catchup_window_ms": 60_000, "pause_on_failure": False},
                          create_ms=1, update_ms=2, **changes)


@pytest.mark.parametrize("changes", [
    {},
    {"paused": True, "note": "n", "limited_actions": True, "remaining_actions": 3, "memo": {"a": 1}},
    {"recent": [RecentAction(1, 2, 3, "w-1", "r", "COMPLETED", manual=True)],
     "running": [{"workflow_id": "w-1", "run_id": "r"}],
     "buffer": [{"nominal_ms": 5, "actual_ms": 5, "overlap": 0, "manual": False}],
     "backfills": [{"after_ms": 0, "end_ms": 9, "overlap": 2}], "due_ms": 7, "last_failure": {"message": "x"}},
])
def test_a_stored_schedule_reads_back_as_written(changes):
    schedule = _schedule(**changes)
    raw = orjson.dumps(schedule.to_json())
    read = StoredSchedule.from_json(orjson.loads(raw))
    assert read == schedule and orjson.dumps(read.to_json()) == raw


def test_each_schedule_read_has_lists_of_its_own():
    first, second = (StoredSchedule.from_json(orjson.loads(orjson.dumps(_schedule().to_json()))) for _ in range(2))
    first.buffer.append({"nominal_ms": 1})
    first.recent.append(RecentAction(1, 1, 1, "w"))
    assert second.buffer == [] and second.recent == [] and StoredSchedule.from_json(_schedule().to_json()).running == []


def test_a_document_that_is_no_schedule_is_refused():
    doc = _schedule().to_json()
    with pytest.raises(TypeError, match=r"missing \['spec_json'\]"):
        StoredSchedule.from_json({k: v for k, v in doc.items() if k != "spec_json"})
    with pytest.raises(TypeError, match=r"unknown \['colour'\]"):
        StoredSchedule.from_json({**doc, "colour": "red"})


def test_a_schedule_stored_with_its_spec_as_a_dict_reads_with_the_same_spec():
    doc = _schedule().to_json()
    old = {**doc, "spec": orjson.loads(doc.pop("spec_json"))}  # as stored before the spec was text
    read = StoredSchedule.from_json(old)
    assert read.spec == {"interval": [{"interval_ms": 1000, "phase_ms": 0}]} and read == _schedule()
    read.spec = {"interval": []}  # an UPDATE sets the dict: stored as text
    assert read.spec_json == '{"interval":[]}'
