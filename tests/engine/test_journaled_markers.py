"""JOURNAL_MARKERS: local activity markers kept with the run while its task is out, carried
to the next attempt of a task that times out; the task's answer, which carries every
marker, is what history records (Temporal's place: after its WORKFLOW_TASK_COMPLETED)."""

from __future__ import annotations

import orjson

from streamproc.engine.processing import Limits
from tests.engine.workflow_driver import S, attrs, rejections

DRIVER_OPTIONS = {"limits": Limits(max_payload_bytes=1000)}


def marker(seq: int, result: str = "r") -> dict:
    return {"type": "RECORD_MARKER", "marker_name": "LocalActivity",
            "details": {"seq": str(seq), "activity_id": str(seq), "activity_type": "step", "attempt": 1,
                        "result": f'"{result}{seq}"'}}


def journal(d, key, markers, attempt=None, scheduled_event_id=None, request_id=None, before=None, identity="w"):
    """A journal of `markers` from `identity`, following what the run kept (or `before`)."""
    task = d.task(key)
    if before is None:
        before = len((d.run(key) or {}).get("journaled_markers", []))
    events, _ = d.send("JOURNAL_MARKERS", key, request_id=request_id,
                       scheduled_event_id=task["scheduled_event_id"] if scheduled_event_id is None else scheduled_event_id,
                       attempt=task["attempt"] if attempt is None else attempt, identity=identity,
                       commands=orjson.dumps(markers).decode(),
                       attributes=orjson.dumps({"journaled_before": before}).decode())
    return events


def seqs(events):
    return [m["details"]["seq"] for m in attrs(events, "MARKER_RECORDED")]


def test_journaled_markers_write_no_event_and_the_answer_is_what_history_records(d):
    key, _ = d.start()
    before = d.types(key)
    assert journal(d, key, [marker(1)]) == [] and journal(d, key, [marker(2), marker(3)]) == []
    assert d.types(key) == before  # nothing in history until the task completes
    assert [m["details"]["seq"] for m in d.run(key)["journaled_markers"]] == ["1", "2", "3"]
    d.complete(key, [marker(1), marker(2), marker(3), marker(4), {"type": "COMPLETE_WORKFLOW_EXECUTION",
                                                                   "result": '"done"'}])
    events = d.check(key)
    types = [e["event_type"] for e in events]
    assert types[-6:] == ["WORKFLOW_TASK_COMPLETED", "MARKER_RECORDED", "MARKER_RECORDED", "MARKER_RECORDED",
                          "MARKER_RECORDED", "WORKFLOW_EXECUTION_COMPLETED"]
    assert seqs(events) == ["1", "2", "3", "4"]  # once each
    completed_id = events[-6]["event_id"]
    assert {m["workflow_task_completed_event_id"] for m in attrs(events, "MARKER_RECORDED")} == {completed_id}
    assert "journaled_markers" not in d.run(key)


def test_journaled_markers_the_answer_does_not_carry_are_not_written(d):
    # The code that answered did not make those calls (it changed, or saw something new).
    key, _ = d.start()
    journal(d, key, [marker(1), marker(2)])
    d.complete(key, [{"type": "START_TIMER", "timer_id": "t", "start_to_fire_timeout_ms": 5 * S}])
    events = d.check(key, closed=False)
    assert "MARKER_RECORDED" not in [e["event_type"] for e in events]
    assert "journaled_markers" not in d.run(key)


def test_a_journal_that_follows_none_starts_the_kept_markers_over(d):
    # Its worker runs the task from its start: the task came to it again from the queue.
    key, _ = d.start()
    journal(d, key, [marker(1), marker(2)])
    assert rejections(journal(d, key, [marker(1, "again")], before=0)) == []
    kept = d.run(key)["journaled_markers"]
    assert [(m["details"]["seq"], m["details"]["result"]) for m in kept] == [("1", '"again1"')]
    (refused,) = rejections(journal(d, key, [marker(3)], before=2))  # the first worker, still going
    assert refused.rejection_type == "INVALID_STATE" and "run kept 1" in refused.rejection_reason


def test_two_executions_of_one_attempt_do_not_mix_their_journals(d):
    # The task delivered again while its first worker ran on: the second starts over, and
    # the first's next journal does not follow the second's markers.
    key, _ = d.start()
    journal(d, key, [marker(1, "first")], identity="a")
    assert rejections(journal(d, key, [marker(1, "second")], before=0, identity="b")) == []
    (refused,) = rejections(journal(d, key, [marker(2, "first")], before=1, identity="a"))
    assert refused.rejection_type == "INVALID_STATE" and "'b''s, not 'a''s" in refused.rejection_reason
    kept = d.run(key)["journaled_markers"]
    assert [(m["details"]["seq"], m["details"]["result"]) for m in kept] == [("1", '"second1"')]


def test_a_journal_after_one_that_was_refused_is_refused_so_what_is_kept_has_no_gap(d):
    key, _ = d.start()
    assert rejections(journal(d, key, [marker(1)])) == []
    assert rejections(journal(d, key, [marker(2, "b" * 950)], before=1))  # past the payload limit
    (refused,) = rejections(journal(d, key, [marker(3)], before=2))  # the worker counted 2 journaled
    assert "a journal before it was refused or lost" in refused.rejection_reason
    assert [m["details"]["seq"] for m in d.run(key)["journaled_markers"]] == ["1"]


def test_a_timed_out_task_keeps_them_and_its_next_attempt_carries_them(d):
    key, _ = d.start()
    journal(d, key, [marker(1), marker(2)])
    d.run_until(d.clock.now_ms() + 11 * S)  # the task's 10 s timeout
    assert "WORKFLOW_TASK_TIMED_OUT" in d.types(key)
    task = d.workflow_tasks()[-1].value
    assert task["attempt"] == 2
    carried = orjson.loads(task["attributes"])["journaled_markers"]
    assert [m["event_type"] for m in carried] == ["MARKER_RECORDED"] * 2
    assert [m["attributes"]["details"]["seq"] for m in carried] == ["1", "2"]
    # The stale attempt's journal is refused; the new attempt's is kept; its answer is recorded.
    stale = journal(d, key, [marker(3)], attempt=1)
    assert [r.rejection_type for r in rejections(stale)] == ["INVALID_STATE"]
    assert rejections(journal(d, key, [marker(3)])) == []
    d.complete(key, [marker(1), marker(2), marker(3), {"type": "COMPLETE_WORKFLOW_EXECUTION", "result": '"done"'}],
               attempt=2)
    assert seqs(d.check(key)) == ["1", "2", "3"]


def test_a_journal_is_carried_to_the_third_attempt_at_most(d):
    # An attempt after the first never reports its failure: code that fails on what was
    # journaled would otherwise get it for ever.
    key, _ = d.start()
    journal(d, key, [marker(1)])
    carried = []
    for _ in range(3):  # attempts 2, 3 and 4, after a 10 s timeout each
        d.run_until(d.clock.now_ms() + 10 * S)
        task = d.workflow_tasks()[-1].value
        carried.append((task["attempt"], "journaled_markers" in orjson.loads(task["attributes"] or "{}")))
    assert carried == [(2, True), (3, True), (4, False)]
    assert "journaled_markers" not in d.run(key)


def test_a_timed_out_task_whose_next_attempt_sees_a_signal_drops_them(d):
    # Its code sees what the journaled attempt did not: it may call other things.
    key, _ = d.start()
    journal(d, key, [marker(1)])
    d.send("SIGNAL", workflow_id="w1", signal_name="cancel", input="[]", identity="c")
    d.run_until(d.clock.now_ms() + 11 * S)
    task = d.workflow_tasks()[-1].value
    assert "WORKFLOW_EXECUTION_SIGNALED" in d.types(key) and task["attempt"] == 1
    assert "journaled_markers" not in orjson.loads(task["attributes"] or "{}")
    assert "journaled_markers" not in d.run(key)


def test_a_failed_task_drops_them(d):
    # Its code failed, and may be changed before the next attempt runs.
    key, _ = d.start()
    journal(d, key, [marker(1)])
    d.fail_task(key)
    assert "journaled_markers" not in d.run(key)
    assert "journaled_markers" not in orjson.loads(d.workflow_tasks()[-1].value["attributes"] or "{}")


def test_an_answer_refused_for_a_close_command_while_a_signal_waits_drops_them(d):
    key, _ = d.start()
    journal(d, key, [marker(1)])
    d.send("SIGNAL", workflow_id="w1", signal_name="cancel", input="[]", identity="c")
    d.complete(key, [marker(1), {"type": "COMPLETE_WORKFLOW_EXECUTION", "result": '"done"'}])
    assert attrs(d.history(key), "WORKFLOW_TASK_FAILED")[0]["cause"] == "UNHANDLED_COMMAND"
    assert "journaled_markers" not in d.run(key)


def test_a_terminated_run_drops_them(d):
    key, run_id = d.start()
    journal(d, key, [marker(1)])
    d.send("TERMINATE", key, workflow_id="w1", run_id=run_id, reason="stop", identity="cli")
    assert d.run(key)["status"] == "TERMINATED" and "journaled_markers" not in d.run(key)
    assert "MARKER_RECORDED" not in d.types(key)


def test_a_journal_for_no_task_out_or_another_task_is_refused_with_a_reason(d):
    key, _ = d.start()
    wrong = journal(d, key, [marker(1)], scheduled_event_id=99, request_id="req-1")
    (rejection,) = rejections(wrong)
    assert rejection.rejection_type == "INVALID_STATE" and "that task is over" in rejection.rejection_reason
    assert rejection.request_id == "req-1"
    d.complete(key, [])
    assert d.task(key) is None
    (rejection,) = rejections(journal(d, key, [marker(1)], scheduled_event_id=2, attempt=1))
    assert rejection.rejection_type == "INVALID_STATE"


def test_bad_journals_are_refused_and_change_nothing(d):
    key, _ = d.start()
    bad = [
        ([], "non-empty JSON list"),
        ([{"type": "START_TIMER", "timer_id": "t"}], "only RECORD_MARKER"),
        ([{"type": "RECORD_MARKER", "details": {"seq": "1"}}], "MarkerName is not set"),
        ([{"type": "RECORD_MARKER", "marker_name": "LocalActivity", "details": {"result": "x"}}], "name its seq"),
        ([marker(1, "x" * 2000)], "more than the limit of 1000"),
    ]
    for commands, reason in bad:
        (rejection,) = rejections(journal(d, key, commands, before=0))
        assert rejection.rejection_type == "INVALID_ARGUMENT" and reason in rejection.rejection_reason, \
            rejection.rejection_reason
    events, _ = d.send("JOURNAL_MARKERS", key, scheduled_event_id=d.task(key)["scheduled_event_id"], attempt=1,
                       identity="w", commands="[not json")
    assert "not valid JSON" in rejections(events)[0].rejection_reason
    for attributes in (None, "{}", '{"journaled_before": -1}', '{"journaled_before": "0"}'):
        events, _ = d.send("JOURNAL_MARKERS", key, scheduled_event_id=d.task(key)["scheduled_event_id"], attempt=1,
                           identity="w", commands=orjson.dumps([marker(1)]).decode(), attributes=attributes)
        assert "must name journaled_before" in rejections(events)[0].rejection_reason
    assert "journaled_markers" not in d.run(key)


def test_the_journaled_bytes_of_a_run_are_bounded(d):
    key, _ = d.start()
    for seq in range(1, 8):  # about 100 bytes each against a limit of 1,000
        assert rejections(journal(d, key, [marker(seq, "y" * 50)])) == []
    over = [journal(d, key, [marker(seq, "y" * 50)]) for seq in range(8, 12)]
    refused = rejections([r for events in over for r in events])
    assert refused and "answer the task to write them" in refused[0].rejection_reason
    assert len(d.run(key)["journaled_markers"]) < 11
