"""Replay: the same code reproduces its commands; changed code is caught; patches and
sticky instances behave as Temporal's."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from streamproc import workflow
from streamproc.activity.payloads import decode
from streamproc.workflow.definition import WorkflowDefinition
from streamproc.workflow.instance import WorkflowInstance
from streamproc.workflow.replayer import Replayer
from tests.workflow.history import History, Run

MINUTE = timedelta(minutes=1)


def steps_workflow(name: str, *steps: str, result: str = "done") -> type:
    """A workflow type `name` whose code runs `steps` in order, each an activity type or
    "sleep" (a minute's timer), then returns `result`: one code and its changed versions."""

    @workflow.defn(name=name)
    class Steps:
        @workflow.run
        async def run(self) -> str:
            for step in steps:
                if step == "sleep":
                    await workflow.sleep(MINUTE)
                else:
                    await workflow.execute_activity(step, start_to_close_timeout=MINUTE)
            return result

    return Steps


ShippingV1 = steps_workflow("Shipping", "pack", "sleep", "ship")


def shipping_history(workflow_cls: type = ShippingV1) -> History:
    """A complete ShippingV1 history, recorded the way the engine writes it."""
    run = Run(workflow_cls)
    run.step()
    run.history.activity_completed("1", None)
    run.history.schedule_task()
    run.step()
    run.history.timer_fired("2")
    run.history.schedule_task()
    run.step()
    run.history.activity_completed("3", None)
    run.history.schedule_task()
    run.step()
    return run.history


def replay(workflow_cls: type, events: list) -> object:
    return WorkflowInstance(WorkflowDefinition.of(workflow_cls), events).activate()


def test_replaying_each_prefix_reproduces_the_commands_recorded_after_it():
    events = shipping_history().events
    for index, event in enumerate(events):
        if event["event_type"] != "WORKFLOW_TASK_SCHEDULED":
            continue
        outcome = replay(ShippingV1, events[:index + 1])
        recorded = [e["event_type"] for e in events[index + 3:]
                    if e["attributes"].get("workflow_task_completed_event_id") == index + 3]
        assert [c["type"] for c in outcome.commands] == [
            {"ACTIVITY_TASK_SCHEDULED": "SCHEDULE_ACTIVITY_TASK", "TIMER_STARTED": "START_TIMER",
             "WORKFLOW_EXECUTION_COMPLETED": "COMPLETE_WORKFLOW_EXECUTION"}[t] for t in recorded]


ShippingWithOtherActivity = steps_workflow("Shipping", "wrap", "sleep", "ship")
ShippingWithoutTimer = steps_workflow("Shipping", "pack", "ship")
ShippingWithExtraTimer = steps_workflow("Shipping", "pack", "sleep", "sleep", "ship")


def test_changed_activity_type_is_a_non_determinism_error():
    outcome = replay(ShippingWithOtherActivity, shipping_history().events[:9])
    assert outcome.cause == "NON_DETERMINISTIC_ERROR"
    assert outcome.commands is None
    assert outcome.failure["message"] == (
        "[TMPRL1100] Nondeterminism error: activity type of ActivityTaskScheduled(event_id=5, "
        "activity_type='pack', activity_id='1') does not match activity type of the command the "
        "workflow code now issues, ScheduleActivityTask(activity_type='wrap', activity_id='1')")
    assert outcome.failure["type"] == "NonDeterminismError"


def test_removed_timer_is_a_non_determinism_error():
    outcome = replay(ShippingWithoutTimer, shipping_history().events[:13])
    assert outcome.cause == "NON_DETERMINISTIC_ERROR"
    assert outcome.failure["message"] == (
        "[TMPRL1100] Nondeterminism error: history has TimerStarted(event_id=11, timer_id='2') "
        "where the workflow code now issues ScheduleActivityTask(activity_type='ship', activity_id='2')")


def test_added_timer_is_a_non_determinism_error():
    with pytest.raises(workflow.NonDeterminismError, match="TimerStarted|StartTimer"):
        Replayer(workflows=[ShippingWithExtraTimer]).replay(shipping_history().events)


def test_replayer_accepts_the_unchanged_code_and_json_text():
    import orjson

    events = shipping_history().events
    assert Replayer(workflows=[ShippingV1]).replay(orjson.dumps(events)).commands == []
    with pytest.raises(ValueError, match="no workflow registered for type 'Shipping'"):
        Replayer(workflows=[CheckoutV2]).replay(events)


# -- patches ---------------------------------------------------------------------------------
CheckoutV1 = steps_workflow("Checkout", "sleep", "charge_v1", result="v1")


@workflow.defn(name="Checkout")
class CheckoutV2:
    @workflow.run
    async def run(self) -> str:
        await workflow.sleep(MINUTE)
        if workflow.patched("charge-v2"):
            await workflow.execute_activity("charge_v2", start_to_close_timeout=MINUTE)
            return "v2"
        await workflow.execute_activity("charge_v1", start_to_close_timeout=MINUTE)
        return "v1"


@workflow.defn(name="Checkout")
class CheckoutV3:
    @workflow.run
    async def run(self) -> str:
        await workflow.sleep(MINUTE)
        workflow.deprecate_patch("charge-v2")
        await workflow.execute_activity("charge_v2", start_to_close_timeout=MINUTE)
        return "v2"


#: The patch call removed once no run without its marker is left.
CheckoutV4 = steps_workflow("Checkout", "sleep", "charge_v2", result="v2")


def _checkout_until_the_charge(workflow_cls: type) -> Run:
    run = Run(workflow_cls)
    run.step()
    run.history.timer_fired("1")
    run.history.schedule_task()
    return run


def test_patched_takes_the_new_path_on_first_execution_and_records_a_marker():
    run = _checkout_until_the_charge(CheckoutV2)
    marker, charge = run.step()
    assert marker == {"type": "RECORD_MARKER", "marker_name": "patch", "details": {"patch_id": "charge-v2"}}
    assert charge["activity_type"] == "charge_v2"
    run.history.activity_completed("2", None)
    run.history.schedule_task()
    assert run.step()[0]["result"] == '"v2"'
    assert Replayer(workflows=[CheckoutV2]).replay(run.history.events).commands == []


def test_patched_keeps_the_old_path_for_a_history_recorded_without_the_marker():
    old = _checkout_until_the_charge(CheckoutV1)
    old.step()
    old.history.activity_completed("2", None)
    old.history.schedule_task()
    # A worker with the new code takes over the old run: it must replay and finish as v1.
    outcome = replay(CheckoutV2, old.history.events)
    assert outcome.commands == [{"type": "COMPLETE_WORKFLOW_EXECUTION", "result": '"v1"'}]


def test_deprecated_patch_replays_histories_with_and_without_the_marker():
    patched = _checkout_until_the_charge(CheckoutV2)
    patched.step()
    patched.history.activity_completed("2", None)
    patched.history.schedule_task()
    assert replay(CheckoutV3, patched.history.events).commands[0]["result"] == '"v2"'
    # A run started after the deprecation records the marker too, flagged deprecated.
    fresh = _checkout_until_the_charge(CheckoutV3)
    assert fresh.step()[0]["details"] == {"patch_id": "charge-v2", "deprecated": True}
    # Once the patch call is gone, histories with its marker still replay.
    assert replay(CheckoutV4, patched.history.events).commands[0]["result"] == '"v2"'


def test_removing_a_patched_branch_too_early_is_caught():
    old = _checkout_until_the_charge(CheckoutV1)
    old.step()
    old.history.schedule_task()
    outcome = replay(CheckoutV4, old.history.events)
    assert outcome.cause == "NON_DETERMINISTIC_ERROR"
    assert "'charge_v1'" in outcome.failure["message"] and "'charge_v2'" in outcome.failure["message"]


# -- sticky instances ------------------------------------------------------------------------
@workflow.defn
class Busy:
    @workflow.run
    async def run(self) -> list:
        results = []
        for i in range(3):
            a = workflow.start_activity("work", i, start_to_close_timeout=MINUTE)
            done, _ = await asyncio.wait([a, asyncio.ensure_future(workflow.sleep(30))],
                                         return_when=asyncio.FIRST_COMPLETED)
            results.append([workflow.random().randint(0, 99), a in done])
            if a in done:
                continue
            results.append(await a)
        return results


def test_sticky_extend_answers_every_task_exactly_as_a_full_replay():
    run = Run(Busy)
    # Each round schedules an activity and a timer (ids 1+2, 3+4, 5+6); whichever the
    # history delivers first decides the round.
    events_to_feed = [("activity", "1"), ("timer", "4"), ("activity", "3"), ("timer", "6"), ("activity", "5")]
    answers = []
    for kind, ident in events_to_feed:
        sticky = run.activate()
        assert sticky == run.replay()
        answers.append(sticky.commands)
        run.history.complete_task(sticky.commands)
        if kind == "activity":
            run.history.activity_completed(ident, f"r{ident}")
        else:
            run.history.timer_fired(ident)
        run.history.schedule_task()
    final = run.activate()
    assert final == run.replay()
    (complete,) = final.commands
    result = decode(complete["result"])
    assert [r if isinstance(r, str) else r[1] for r in result] == [True, False, "r3", False, "r5"]
    assert [[(c["type"], c.get("activity_id") or c.get("timer_id")) for c in a] for a in answers] == [
        [("SCHEDULE_ACTIVITY_TASK", "1"), ("START_TIMER", "2")],
        [("SCHEDULE_ACTIVITY_TASK", "3"), ("START_TIMER", "4")], [],
        [("SCHEDULE_ACTIVITY_TASK", "5"), ("START_TIMER", "6")], []]


def test_a_sticky_instance_whose_answer_was_refused_replays_from_scratch():
    run = Run(ShippingV1)
    first = run.activate()
    run.history.fail_task(cause="BAD_SCHEDULE_ACTIVITY_ATTRIBUTES")
    run.history.schedule_task(attempt=2)
    retried = run.activate()
    assert retried.commands == first.commands  # activity id "1" again, not "2"
    run.history.complete_task(retried.commands)
    run.history.activity_completed("1", None)
    run.history.schedule_task()
    assert run.activate() == run.replay()


def test_a_sticky_instance_whose_task_timed_out_answers_the_retry_like_a_fresh_replay():
    run = Run(ShippingV1)
    run.step()
    run.history.activity_completed("1", None)
    run.history.schedule_task()
    late = run.activate()  # the answer is lost: the engine times the task out
    run.history.time_out_task()
    run.history.schedule_task(attempt=2)
    retried = run.activate()
    assert retried == run.replay() == late
    assert retried.commands == [{"type": "START_TIMER", "timer_id": "2", "start_to_fire_timeout_ms": 60_000}]
