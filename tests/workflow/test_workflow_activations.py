"""What workflow code issues on each workflow task, and how history's events reach it."""

from __future__ import annotations

import asyncio
from datetime import timedelta


from streamproc import workflow
from streamproc.activity.payloads import decode
from tests.workflow.history import START_MS, Run

SECOND = timedelta(seconds=1)


@workflow.defn
class TwoInParallel:
    @workflow.run
    async def run(self) -> list:
        return list(await asyncio.gather(
            workflow.execute_activity("left", 1, start_to_close_timeout=SECOND),
            workflow.execute_activity("right", 2, start_to_close_timeout=SECOND)))


def test_gather_of_two_activities_schedules_both_in_one_task_and_waits_for_both():
    run = Run(TwoInParallel)
    commands = run.step()
    assert [(c["activity_id"], c["activity_type"]) for c in commands] == [("1", "left"), ("2", "right")]
    run.history.activity_completed("2", "R")  # closes first: the order of results is gather's
    run.history.schedule_task()
    assert run.step() == []  # one result is not enough
    run.history.activity_completed("1", "L")
    run.history.schedule_task()
    assert run.step() == [{"type": "COMPLETE_WORKFLOW_EXECUTION", "result": '["L","R"]'}]


@workflow.defn(name="Options")
class WithOptions:
    @workflow.run
    async def run(self) -> None:
        await workflow.execute_activity(
            "charge", args=["a", 2], task_queue="payments", schedule_to_close_timeout=timedelta(minutes=5),
            heartbeat_timeout=timedelta(seconds=30), start_to_close_timeout=timedelta(minutes=1),
            retry_policy=workflow.RetryPolicy(maximum_attempts=3, non_retryable_error_types=["Fatal"]))


def test_activity_options_travel_in_the_command_in_milliseconds():
    (command,) = Run(WithOptions).step()
    assert command == {
        "type": "SCHEDULE_ACTIVITY_TASK", "activity_id": "1", "activity_type": "charge",
        "task_queue": "payments", "input": '["a",2]', "schedule_to_close_timeout_ms": 300_000,
        "schedule_to_start_timeout_ms": 0, "start_to_close_timeout_ms": 60_000,
        "heartbeat_timeout_ms": 30_000,
        "retry_policy": {"initial_interval_ms": 0, "backoff_coefficient": 0.0, "maximum_interval_ms": 0,
                         "maximum_attempts": 3, "non_retryable_error_types": ["Fatal"]}}


@workflow.defn
class NoTimeout:
    @workflow.run
    async def run(self) -> None:
        await workflow.execute_activity("charge")


def test_an_activity_without_timeouts_fails_the_task_with_the_engines_message():
    outcome = Run(NoTimeout).activate()
    assert outcome.cause == "WORKFLOW_WORKER_UNHANDLED_FAILURE"
    assert outcome.failure["message"] == ("a valid StartToCloseTimeout or ScheduleToCloseTimeout must be "
                                          "set on the activity. ActivityId=1 ActivityType=charge")


@workflow.defn
class CatchesActivityErrors:
    @workflow.run
    async def run(self) -> list:
        seen = []
        for name in ("fails", "times_out"):
            try:
                await workflow.execute_activity(name, start_to_close_timeout=SECOND)
            except workflow.ActivityError as err:
                cause = err.cause
                seen.append([err.message, err.activity_type, err.retry_state.name, type(cause).__name__,
                             getattr(cause, "type", None) if not isinstance(cause, workflow.TimeoutError)
                             else cause.type.name, cause.message])
        return seen


def test_activity_failure_and_timeout_surface_as_activity_error_with_the_cause():
    run = Run(CatchesActivityErrors)
    run.step()
    run.history.activity_failed("1", "card declined", error_type="Declined")
    run.history.schedule_task()
    run.step()
    run.history.activity_timed_out("2", "START_TO_CLOSE")
    run.history.schedule_task()
    (complete,) = run.step()
    assert decode(complete["result"]) == [
        ["Activity task failed", "fails", "MAXIMUM_ATTEMPTS_REACHED", "ApplicationError", "Declined",
         "card declined"],
        ["Activity task timed out", "times_out", "MAXIMUM_ATTEMPTS_REACHED", "TimeoutError", "START_TO_CLOSE",
         "activity StartToClose timeout"]]


@workflow.defn
class FailsOnPurpose:
    @workflow.run
    async def run(self) -> None:
        raise workflow.ApplicationError("out of stock", {"sku": 7}, type="OutOfStock", non_retryable=True)


def test_application_error_fails_the_workflow_with_a_failure_record():
    (fail,) = Run(FailsOnPurpose).step()
    assert fail["type"] == "FAIL_WORKFLOW_EXECUTION"
    failure = fail["failure"]
    assert (failure["message"], failure["kind"], failure["type"], failure["non_retryable"]) == \
        ("out of stock", "APPLICATION", "OutOfStock", True)
    assert decode(failure["details"]) == [{"sku": 7}]


@workflow.defn
class LetsActivityErrorEscape:
    @workflow.run
    async def run(self) -> None:
        await workflow.execute_activity("fails", start_to_close_timeout=SECOND)


def test_an_uncaught_activity_error_fails_the_workflow_as_temporal_does():
    run = Run(LetsActivityErrorEscape)
    run.step()
    run.history.activity_failed("1", "boom")
    run.history.schedule_task()
    (fail,) = run.step()
    assert fail["type"] == "FAIL_WORKFLOW_EXECUTION"
    assert fail["failure"]["message"] == "Activity task failed"
    assert fail["failure"]["cause"]["message"] == "boom"


@workflow.defn
class HasABug:
    @workflow.run
    async def run(self) -> None:
        await workflow.sleep(5)
        {}["missing"]


def test_any_other_exception_fails_only_the_task_and_the_retry_runs_again():
    run = Run(HasABug)
    run.step()
    run.history.timer_fired("1")
    run.history.schedule_task()
    outcome = run.activate()
    assert outcome.failed and outcome.commands is None
    assert outcome.cause == "WORKFLOW_WORKER_UNHANDLED_FAILURE"
    assert (outcome.failure["type"], outcome.failure["message"]) == ("KeyError", "'missing'")
    assert isinstance(outcome.error, KeyError)
    # The engine records the failed task and schedules another: same bug, same answer.
    run.history.fail_task()
    run.history.schedule_task(attempt=2)
    assert run.activate().failure["type"] == "KeyError"


@workflow.defn
class WaitsForApproval:
    def __init__(self) -> None:
        self.approved = False

    @workflow.run
    async def run(self, timeout_s: float) -> str:
        async def approve_later() -> None:
            await workflow.execute_activity("approve", start_to_close_timeout=SECOND)
            self.approved = True

        approval = asyncio.ensure_future(approve_later())
        try:
            await workflow.wait_condition(lambda: self.approved, timeout=timeout_s)
        except asyncio.TimeoutError:
            approval.cancel()
            return "timed out"
        return "approved"


def test_wait_condition_satisfied_first_cancels_its_timer():
    run = Run(WaitsForApproval, 60)
    # The background task starts once the run method waits: the timer comes first.
    assert [c["type"] for c in run.step()] == ["START_TIMER", "SCHEDULE_ACTIVITY_TASK"]
    run.history.activity_completed("2", None)
    run.history.schedule_task()
    assert run.step() == [{"type": "CANCEL_TIMER", "timer_id": "1"},
                          {"type": "COMPLETE_WORKFLOW_EXECUTION", "result": '"approved"'}]


def test_wait_condition_timeout_raises_timeout_error_and_the_workflow_cleans_up():
    run = Run(WaitsForApproval, 60)
    commands = run.step()
    assert commands[0] == {"type": "START_TIMER", "timer_id": "1", "start_to_fire_timeout_ms": 60_000}
    run.history.advance(timedelta(minutes=1))
    run.history.timer_fired("1")
    run.history.schedule_task()
    assert run.step() == [{"type": "REQUEST_CANCEL_ACTIVITY_TASK", "scheduled_event_id": 6},
                          {"type": "COMPLETE_WORKFLOW_EXECUTION", "result": '"timed out"'}]


@workflow.defn
class ContinuesAsNew:
    @workflow.run
    async def run(self, count: int) -> None:
        await workflow.sleep(timedelta(minutes=1))
        workflow.continue_as_new(count + 1, run_timeout=timedelta(hours=1))


def test_continue_as_new_ends_the_run_with_the_next_runs_input():
    run = Run(ContinuesAsNew, 4)
    run.step()
    run.history.timer_fired("1")
    run.history.schedule_task()
    assert run.step() == [{"type": "CONTINUE_AS_NEW_WORKFLOW_EXECUTION", "workflow_type": "ContinuesAsNew",
                           "task_queue": "orders", "input": "[5]", "workflow_run_timeout_ms": 3_600_000,
                           "workflow_task_timeout_ms": 0}]


@workflow.defn
class DeterministicValues:
    @workflow.run
    async def run(self) -> list:
        first = [workflow.now().isoformat(), workflow.random().random(), str(workflow.uuid4()),
                 workflow.info().workflow_id, workflow.info().run_id, workflow.info().attempt]
        await workflow.sleep(timedelta(hours=1))
        return first + [workflow.now().isoformat(), workflow.random().randint(0, 10**9), str(workflow.uuid4())]


def _values_after_the_timer(run: Run) -> list:
    run.step()
    run.history.advance(timedelta(hours=1, seconds=3))
    run.history.timer_fired("1")
    run.history.schedule_task()
    return decode(run.activate().commands[0]["result"])


def test_now_random_and_uuid4_are_identical_on_replay_and_now_is_the_tasks_time():
    run = Run(DeterministicValues, workflow_id="order-1", run_id="r-9")
    values = _values_after_the_timer(run)
    outcome = run.activate()
    assert values[0] == "2026-09-21T14:13:20+00:00"
    assert START_MS == 1_790_000_000_000
    assert values[3:6] == ["order-1", "r-9", 1]
    assert values[6] == "2026-09-21T15:13:23+00:00"
    assert values[2] != values[8] and values[2][14] == "4"  # version 4 UUIDs, fresh each call
    assert run.replay() == outcome  # a fresh replay draws exactly the same values
    # Another run of the same workflow id draws other numbers.
    other = _values_after_the_timer(Run(DeterministicValues, workflow_id="order-1", run_id="r-10"))
    assert other[1] != values[1] and other[2] != values[2]
