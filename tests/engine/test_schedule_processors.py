"""Schedules through the processors with a manual clock (SEMANTICS.md 8): creating and
describing, action times, workflows started and heard back from, refusals."""

from __future__ import annotations

import orjson
import pytest

from tests.engine.schedule_driver import ACTION, FAIL, ScheduleDriver, iso, ms
from tests.engine.workflow_driver import rejections

HOURLY = {"interval": [{"interval_ms": 3_600_000}]}

DRIVER = ScheduleDriver


def test_create_answers_and_describe_shows_the_compiled_spec_and_next_times(d):
    events, replies = d.create({"cron_string": ["30 9 * * MON-FRI"]}, request_id="req-1")
    assert [(r.intent, r.request_id) for r in replies] == [("CREATED", "req-1")]
    assert [e.intent for e in events] == ["CREATED"]
    described = d.describe()
    spec = described["schedule"]["spec"]
    assert spec["structured_calendar"][0]["hour"] == [{"start": 9, "end": 9, "step": 1}]
    assert "cron_string" not in spec or not spec["cron_string"]  # compiled away
    assert [iso(t) for t in described["info"]["future_action_times_ms"][:3]] == [
        "2026-05-05T09:30:00Z", "2026-05-06T09:30:00Z", "2026-05-07T09:30:00Z"]
    assert described["schedule"]["policy"] == {"overlap": "SKIP", "catchup_window_ms": 365 * 86_400_000,
                                               "pause_on_failure": False}


def test_an_hourly_schedule_starts_its_workflows_named_by_their_nominal_time(d):
    d.create(HOURLY)
    d.advance_to("2026-05-04T13:30:00Z")
    assert d.started_ids() == ["report-2026-05-04T11:00:00Z", "report-2026-05-04T12:00:00Z",
                               "report-2026-05-04T13:00:00Z"]
    run_key = d.current_key("report-2026-05-04T12:00:00Z")
    started = d.history(run_key)[0]["attributes"]
    assert started["search_attributes"]["TemporalScheduledById"] == "s1"
    assert started["search_attributes"]["TemporalScheduledStartTime"] == "2026-05-04T12:00:00Z"
    assert started["last_completion_result"] == '"done"'  # the 11:00 run's result
    info = d.describe()["info"]
    assert info["action_count"] == 3 and info["running_workflows"] == []
    assert [a["status"] for a in info["recent_actions"]] == ["COMPLETED"] * 3
    assert all(a["run_id"] for a in info["recent_actions"])


def test_the_same_create_sent_again_is_answered_and_another_is_refused(d):
    d.create(HOURLY, request_id="req-1")
    _, again = d.create(HOURLY, request_id="req-1")
    assert [r.intent for r in again] == ["CREATED"]
    _, other = d.create(HOURLY, request_id="req-2")
    assert [(r.rejection_type, r.rejection_reason) for r in other] == [
        ("ALREADY_EXISTS", "schedule with this ID is already registered")]


@pytest.mark.parametrize("spec, reason", [
    ({"cron_string": ["0 12 * *"]}, "Invalid schedule spec: CronString does not have 5-7 fields"),
    ({"cron_string": ["@every 1h/1h"]}, "Invalid schedule spec: phase cannot be greater than Interval"),
    ({"calendar": [{"day_of_week": "Fri-Mon"}]},
     "Invalid schedule spec: DayOfWeek End is before Start or not in range [0-7]"),
], ids=["S46", "S45", "S48"])
def test_an_invalid_spec_is_refused_with_temporals_message_and_nothing_is_kept(d, spec, reason):
    events, replies = d.create(spec, request_id="bad")
    assert [(r.rejection_type, r.rejection_reason, r.request_id) for r in replies] == [
        ("INVALID_ARGUMENT", reason, "bad")]
    assert d.stored() is None and rejections(events)


def test_an_unknown_time_zone_and_a_memo_over_the_payload_limit_are_refused(d):
    _, replies = d.create({**HOURLY, "timezone_name": "Mars/Olympus"})
    assert replies[0].rejection_type == "INVALID_ARGUMENT" and "Mars/Olympus" in replies[0].rejection_reason
    _, replies = d.create(HOURLY, attributes=orjson.dumps({"memo": {"x": "y" * 300_000}}).decode())
    assert replies[0].rejection_type == "INVALID_ARGUMENT" and "memo" in replies[0].rejection_reason
    _, replies = d.create(HOURLY, action={**ACTION, "id_reuse_policy": "REJECT_DUPLICATE"})
    assert replies[0].rejection_type == "INVALID_ARGUMENT"
    assert d.stored() is None


def test_a_week_across_new_yorks_spring_forward_skips_the_missing_wall_time(tmp_path):
    d = ScheduleDriver(tmp_path / "db", start="2026-03-06T12:00:00Z")
    d.create({"cron_string": ["CRON_TZ=America/New_York 30 2 * * *"]})
    d.advance_to("2026-03-12T12:00:00Z")
    assert d.started_times() == ["2026-03-07T07:30:00Z", "2026-03-09T06:30:00Z", "2026-03-10T06:30:00Z",
                                 "2026-03-11T06:30:00Z", "2026-03-12T06:30:00Z"]
    d.close()


def test_londons_fall_back_hour_fires_twice(tmp_path):
    d = ScheduleDriver(tmp_path / "db", start="2026-10-24T22:00:00Z")
    d.create({"calendar": [{"hour": "*", "minute": "30"}], "timezone_name": "Europe/London"})
    d.advance_to("2026-10-25T02:00:00Z")
    # 23:30 and 00:30 BST, then 01:30 BST (00:30Z) and 01:30 GMT (01:30Z)
    assert d.started_times() == ["2026-10-24T22:30:00Z", "2026-10-24T23:30:00Z", "2026-10-25T00:30:00Z",
                                 "2026-10-25T01:30:00Z"]
    d.close()


@pytest.mark.parametrize("window_ms, taken, missed", [
    (10_000, ["2026-05-04T13:10:00Z"], 17),
    (3_600_000, ["2026-05-04T12:20:00Z"], 12),
    (365 * 86_400_000, ["2026-05-04T10:20:00Z"], 0),
], ids=["10s", "1h", "365d"])
def test_after_a_three_hour_outage_only_actions_inside_the_catchup_window_are_taken(d, window_ms, taken, missed):
    d.create({"interval": [{"interval_ms": 600_000}]}, policy={"catchup_window_ms": window_ms})
    d.advance_to("2026-05-04T10:15:00Z")
    assert d.started_times() == ["2026-05-04T10:10:00Z"]
    d.clock.set(ms("2026-05-04T13:10:05Z"))  # the engine was down from 10:15 to 13:10:05
    d.h.check_due()
    d.settle()
    assert d.started_times()[1:2] == taken
    info = d.describe()["info"]
    assert info["missed_catchup_window"] == missed
    # SKIP: the first one taken runs, the rest of the pass overlap it (SEMANTICS B10)
    assert info["overlap_skipped"] == 18 - missed - 1


def test_an_action_time_before_the_create_was_processed_is_never_taken(d):
    """The schedule exists from when the engine processed its CREATE, not from when the
    client sent it: an engine slower than a test's lead (a loaded machine) makes a
    one-time action that was due in between nobody's, without counting it missed."""
    one_time = {"interval": [{"interval_ms": 1000}], "start_time_ms": ms("2026-05-04T10:00:08Z"),
                "end_time_ms": ms("2026-05-04T10:00:08Z")}
    d.create(one_time, schedule_id="in-time", policy={"overlap": "ALLOW_ALL"})
    d.clock.set(ms("2026-05-04T10:00:08.500Z"))  # the CREATE of "late" processed after its time
    d.create(one_time, schedule_id="late", policy={"overlap": "ALLOW_ALL"})
    d.h.check_due()
    d.settle()
    d.advance_to("2026-05-05T10:00:00Z")
    assert d.started_ids("in-time") == ["report-2026-05-04T10:00:08Z"]
    assert d.started_ids("late") == []
    info = d.describe("late")["info"]
    assert (info["action_count"], info["missed_catchup_window"], info["future_action_times_ms"]) == (0, 0, [])


def _overlapping(d, overlap: str) -> dict:
    """Every 10 minutes, workflows that never finish by themselves, for 35 minutes."""
    d.finish_with = None
    d.create({"interval": [{"interval_ms": 600_000}]}, policy={"overlap": overlap})
    d.advance_to("2026-05-04T10:35:00Z")
    return d.describe()["info"]


def test_skip_drops_actions_while_one_runs(d):
    info = _overlapping(d, "SKIP")
    assert d.started_times() == ["2026-05-04T10:10:00Z"]
    assert info["overlap_skipped"] == 2 and info["buffer_size"] == 0


def test_buffer_one_keeps_one_and_starts_it_when_the_running_one_closes(d):
    info = _overlapping(d, "BUFFER_ONE")
    assert info["overlap_skipped"] == 1 and info["buffer_size"] == 1
    d.terminate_run(d.current_key("report-2026-05-04T10:10:00Z"))
    assert d.started_times() == ["2026-05-04T10:10:00Z", "2026-05-04T10:20:00Z"]


def test_buffer_all_runs_them_one_after_another(d):
    info = _overlapping(d, "BUFFER_ALL")
    assert info["overlap_skipped"] == 0 and info["buffer_size"] == 2
    d.terminate_run(d.current_key("report-2026-05-04T10:10:00Z"))
    d.terminate_run(d.current_key("report-2026-05-04T10:20:00Z"))
    assert d.started_times() == ["2026-05-04T10:10:00Z", "2026-05-04T10:20:00Z", "2026-05-04T10:30:00Z"]


def test_cancel_other_asks_the_running_one_to_cancel_and_starts_after_it_closed(d):
    _overlapping(d, "CANCEL_OTHER")
    first = d.current_key("report-2026-05-04T10:10:00Z")
    assert d.run(first)["cancel_requested"]
    assert "WORKFLOW_EXECUTION_CANCEL_REQUESTED" in d.types(first)
    d.terminate_run(first)  # the workflow's code would cancel; closing it any way lets the next go
    # Both waited; with nothing running the later CANCEL_OTHER start replaces the earlier (8.6).
    assert d.started_times() == ["2026-05-04T10:10:00Z", "2026-05-04T10:30:00Z"]


def test_terminate_other_terminates_the_running_one_and_starts_the_new(d):
    _overlapping(d, "TERMINATE_OTHER")
    assert d.run(d.current_key("report-2026-05-04T10:10:00Z"))["status"] == "TERMINATED"
    assert d.run(d.current_key("report-2026-05-04T10:20:00Z"))["status"] == "TERMINATED"
    assert d.started_times() == ["2026-05-04T10:10:00Z", "2026-05-04T10:20:00Z", "2026-05-04T10:30:00Z"]
    history = d.history(d.current_key("report-2026-05-04T10:10:00Z"))
    assert history[-1]["attributes"]["reason"] == "terminated by schedule overlap policy"


def test_allow_all_starts_every_action_and_tracks_none(d):
    info = _overlapping(d, "ALLOW_ALL")
    assert d.started_times() == ["2026-05-04T10:10:00Z", "2026-05-04T10:20:00Z", "2026-05-04T10:30:00Z"]
    assert info["running_workflows"] == [] and info["overlap_skipped"] == 0


def test_pause_on_failure_pauses_with_temporals_note_and_stops_actions(d):
    d.finish_with = FAIL
    d.create(HOURLY, policy={"pause_on_failure": True})
    d.advance_to("2026-05-04T14:00:00Z")
    assert d.started_times() == ["2026-05-04T11:00:00Z"]
    state = d.describe()["schedule"]["state"]
    assert state["paused"] is True
    assert state["note"] == "paused due to workflow failure: report-2026-05-04T11:00:00Z: broke"
    later = d.history(d.current_key("report-2026-05-04T11:00:00Z"))
    assert later[-1]["event_type"] == "WORKFLOW_EXECUTION_FAILED"


def test_remaining_actions_run_out(d):
    d.create(HOURLY, state={"limited_actions": True, "remaining_actions": 2})
    assert len(d.describe()["info"]["future_action_times_ms"]) == 2
    d.advance_to("2026-05-04T16:00:00Z")
    assert d.started_times() == ["2026-05-04T11:00:00Z", "2026-05-04T12:00:00Z"]
    described = d.describe()
    assert described["schedule"]["state"]["remaining_actions"] == 0
    assert described["info"]["future_action_times_ms"] == []
    assert d.stored().due_ms == ms("2026-05-11T12:00:00Z")  # only its deletion, 7 days on


def test_backfill_of_a_past_range_starts_its_actions_as_manual_starts(d):
    d.create(HOURLY)
    d.patch({"backfill_request": [{"start_time_ms": ms("2026-05-01T00:00:00Z"),
                                   "end_time_ms": ms("2026-05-01T05:00:00Z"), "overlap_policy": "ALLOW_ALL"}]})
    assert d.started_times() == [f"2026-05-01T0{h}:00:00Z" for h in range(6)]
    assert all(a["manual"] for a in d.actions())
    started = d.history(d.current_key("report-2026-05-01T00:00:00Z"))[0]
    assert started["event_type"] == "WORKFLOW_EXECUTION_STARTED"


def test_trigger_while_paused_starts_now_and_automatic_actions_wait(d):
    d.create(HOURLY, state={"paused": True, "note": "off"})
    d.clock.set(ms("2026-05-04T10:17:00Z"))
    _, replies = d.patch({"trigger_immediately": {}})
    assert replies[-1].intent == "PATCHED"
    d.advance_to("2026-05-04T13:00:00Z")
    assert d.started_times() == ["2026-05-04T10:17:00Z"]
    d.patch({"unpause": "on again"})
    d.advance_to("2026-05-04T14:30:00Z")
    # unpausing does not catch up on 11:00 .. 13:00
    assert d.started_times() == ["2026-05-04T10:17:00Z", "2026-05-04T14:00:00Z"]
    assert d.describe()["schedule"]["state"]["note"] == "on again"


def test_a_stale_trigger_is_rejected_and_changes_nothing(d):
    d.create(HOURLY)
    before = d.stored()
    events, _ = d.send_schedule("TRIGGER", due_ms=before.due_ms - 1)
    assert [r.rejection_type for r in rejections(events)] == ["INVALID_STATE"]
    assert d.stored() == before and d.started_ids() == []


def test_update_replaces_the_spec_and_delete_removes_the_schedule(d):
    d.create(HOURLY)
    definition = {"action": {"start_workflow": ACTION}, "spec": {"interval": [{"interval_ms": 1_800_000}]}}
    _, replies = d.send_schedule("UPDATE", schedule=orjson.dumps(definition).decode(), conflict_token=0)
    assert replies[-1].intent == "UPDATED"
    _, replies = d.send_schedule("UPDATE", schedule=orjson.dumps(definition).decode(), conflict_token=0)
    assert replies[-1].rejection_type == "INVALID_STATE" and "conflict token" in replies[-1].rejection_reason
    d.advance_to("2026-05-04T11:10:00Z")
    assert d.started_times() == ["2026-05-04T10:30:00Z", "2026-05-04T11:00:00Z"]
    _, replies = d.send_schedule("DELETE")
    assert replies[-1].intent == "DELETED" and d.stored() is None
    for intent, extra in (("DESCRIBE", {}), ("UPDATE", {"schedule": orjson.dumps(definition).decode()}),
                          ("PATCH", {"patch": '{"pause": "x"}'})):
        _, replies = d.send_schedule(intent, **extra)
        assert replies[-1].rejection_type == "NOT_FOUND", intent
    d.advance_to("2026-05-04T13:00:00Z")
    assert len(d.started_ids()) == 2


def test_list_pages_through_the_partitions_schedules(d):
    for i in range(3):
        d.create(HOURLY, schedule_id=f"s{i}")
    _, replies = d.send_schedule("LIST", schedule_id="")
    page = orjson.loads(replies[-1].value["attributes"])
    assert [s["schedule_id"] for s in page["schedules"]] == ["s0", "s1", "s2"] and not page["more"]
    _, replies = d.send_schedule("LIST", schedule_id="s0")
    assert [s["schedule_id"] for s in orjson.loads(replies[-1].value["attributes"])["schedules"]] == ["s1", "s2"]


def test_a_json_create_as_docs_show_it_works_from_any_language(d):
    command = {"value_type": "SCHEDULE", "intent": "CREATE", "request_id": "r-1", "reply_partition": 0,
               "schedule": {"schedule_id": "nightly-report", "identity": "ops", "schedule": orjson.dumps({
                   "action": {"start_workflow": {"workflow_id": "report", "workflow_type": "Report",
                                                 "task_queue": "reports"}},
                   "spec": {"interval": [{"interval_ms": 3_600_000}]}}).decode()}}
    events = d.h.send(orjson.dumps(command), [("content-type", b"application/json")])
    assert [(e.intent, e.request_id) for e in events] == [("CREATED", "r-1")]
    d.advance_to("2026-05-04T11:30:00Z")
    assert d.started_ids("nightly-report") == ["report-2026-05-04T11:00:00Z"]


def test_a_paused_schedule_still_lists_its_next_times_from_now(d):
    """As Temporal's server does (checked on 1.32: a paused schedule describes 10 next times)."""
    d.create(HOURLY, state={"paused": True})
    d.advance_to("2026-05-04T15:30:00Z")
    times = d.describe()["info"]["future_action_times_ms"]
    assert len(times) == 10 and iso(times[0]) == "2026-05-04T16:00:00Z"


def test_a_schedule_with_no_more_actions_is_deleted_7_days_after_its_last(d):
    d.create({**HOURLY, "end_time_ms": ms("2026-05-04T12:00:00Z")})
    d.create(HOURLY, schedule_id="paused", state={"paused": True})
    d.advance_to("2026-05-11T11:59:59Z")
    assert d.started_times() == ["2026-05-04T11:00:00Z", "2026-05-04T12:00:00Z"] and d.stored() is not None
    d.advance_to("2026-05-11T12:00:01Z")
    assert d.stored() is None
    deleted = [e for e in d.h.events if e.value_type == "SCHEDULE" and e.intent == "DELETED"]
    assert [(e.value["schedule_id"], e.value["reason"]) for e in deleted] == [("s1", "no more actions for 7 days")]
    assert d.stored("paused") is not None  # a paused schedule is kept
