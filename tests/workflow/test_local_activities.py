"""Local activities against the real engine processors (no broker), with a manual clock:
the worker runs them inside the workflow task, records markers, retries short backoffs in
the task and long ones through a timer, and replay takes the markers' outcomes."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from datetime import timedelta

import orjson
import pytest

from streamproc import activity, workflow
from streamproc.workflow.definition import WorkflowDefinition
from streamproc.workflow.instance import WorkflowInstance
from streamproc.workflow.local_activity_runner import LocalActivityRunner
from streamproc.workflow.replayer import Replayer
from tests.engine.workflow_driver import WorkflowDriver, attrs

S = 1000
CALLS: list[tuple[str, int]] = []
FAILURES_LEFT = {"n": 0}
RELEASE = threading.Event()


@activity.defn
def add_one(n: int) -> int:
    assert activity.info().is_local
    CALLS.append(("add_one", activity.info().attempt))
    if FAILURES_LEFT["n"] > 0:
        FAILURES_LEFT["n"] -= 1
        raise RuntimeError("flaky")
    return n + 1


@activity.defn(name="add_one")
def add_one_v2(n: int) -> int:  # the same type under another function: not a code change
    return n + 1


@activity.defn
def add_two(n: int) -> int:
    return n + 2


@activity.defn
async def refuse(n: int) -> int:
    raise activity.ApplicationError("no", type="Refused", non_retryable=True)


@activity.defn
async def hang(n: int) -> int:
    await asyncio.sleep(30)
    return n


@activity.defn
def raise_timeout(n: int) -> int:
    raise TimeoutError("the remote service did not answer")


@activity.defn
def wait_for_release(n: int) -> int:
    RELEASE.wait(30)
    return n


def _policy(**kw):
    return workflow.RetryPolicy(initial_interval=timedelta(seconds=1), backoff_coefficient=2.0, **kw)


@workflow.defn(name="Order")
class OneStep:
    @workflow.run
    async def run(self, n: int) -> int:
        return await workflow.execute_local_activity(add_one, n, start_to_close_timeout=timedelta(seconds=5),
                                                     retry_policy=_policy())


@workflow.defn(name="Order")
class OneStepChanged:
    @workflow.run
    async def run(self, n: int) -> int:
        return await workflow.execute_local_activity(add_two, n, start_to_close_timeout=timedelta(seconds=5))


def step_then_sleep(step) -> type:
    """An "Order" whose code runs the local activity `step`, then sleeps an hour."""

    @workflow.defn(name="Order")
    class StepThenSleep:
        @workflow.run
        async def run(self, n: int) -> int:
            m = await workflow.execute_local_activity(step, n, start_to_close_timeout=timedelta(seconds=5))
            await workflow.sleep(timedelta(hours=1))
            return m

    return StepThenSleep


StepThenSleep = step_then_sleep(add_one)
StepThenSleepChanged = step_then_sleep(add_two)


@workflow.defn(name="Order")
class LongBackoff:
    @workflow.run
    async def run(self, n: int) -> int:
        return await workflow.execute_local_activity(
            add_one, n, start_to_close_timeout=timedelta(seconds=5), local_retry_threshold=timedelta(seconds=5),
            retry_policy=workflow.RetryPolicy(initial_interval=timedelta(seconds=30)))


@workflow.defn(name="Order")
class LongBackoffBounded:
    @workflow.run
    async def run(self, n: int) -> list:
        try:
            return await workflow.execute_local_activity(
                add_one, n, schedule_to_close_timeout=timedelta(seconds=40), local_retry_threshold=timedelta(seconds=5),
                retry_policy=workflow.RetryPolicy(initial_interval=timedelta(seconds=30)))
        except workflow.ActivityError as e:
            return [e.retry_state.name, e.cause.type.name]


@workflow.defn(name="Order")
class Bounded:
    @workflow.run
    async def run(self, n: int) -> list:
        try:
            return await workflow.execute_local_activity(
                add_one, n, schedule_to_close_timeout=timedelta(seconds=3, milliseconds=500),
                retry_policy=workflow.RetryPolicy(initial_interval=timedelta(seconds=1), backoff_coefficient=1.0))
        except workflow.ActivityError as e:
            return [e.retry_state.name, type(e.cause).__name__, e.cause.type.name, type(e.cause.cause).__name__]


@workflow.defn(name="Order")
class Refusing:
    @workflow.run
    async def run(self, n: int) -> list:
        try:
            return await workflow.execute_local_activity(refuse, n, start_to_close_timeout=timedelta(seconds=5))
        except workflow.ActivityError as e:
            return [e.activity_type, e.retry_state.name, type(e.cause).__name__, e.cause.type]


@workflow.defn(name="Order")
class Slow:
    @workflow.run
    async def run(self, n: int) -> int:
        return await workflow.execute_local_activity(wait_for_release, n, start_to_close_timeout=timedelta(seconds=30))


@workflow.defn(name="Order")
class TwoSteps:
    @workflow.run
    async def run(self, n: int) -> int:
        n = await workflow.execute_local_activity(add_one, n, start_to_close_timeout=timedelta(seconds=5))
        return await workflow.execute_local_activity(add_two, n, start_to_close_timeout=timedelta(seconds=5))


@workflow.defn(name="Order")
class TimesOut:
    @workflow.run
    async def run(self, n: int) -> list:
        out = []
        for fn in (hang, raise_timeout):
            try:
                await workflow.execute_local_activity(fn, n, start_to_close_timeout=timedelta(milliseconds=100),
                                                      retry_policy=workflow.RetryPolicy(maximum_attempts=2))
            except workflow.ActivityError as e:
                out.append([e.retry_state.name, type(e.cause).__name__, getattr(e.cause, "type", None)])
        out[0][2] = out[0][2].name
        return out


@workflow.defn(name="Order")
class Abandons:
    @workflow.run
    async def run(self, n: int) -> str:
        handle = workflow.start_local_activity(wait_for_release, n, start_to_close_timeout=timedelta(seconds=30))
        await asyncio.sleep(0)  # the call is made ...
        handle.cancel()  # ... and given up before the worker ran it
        try:
            await handle
        except asyncio.CancelledError:
            return "given up"
        return "ran"


class Worker:
    """Answers a run's workflow tasks with one cached instance, as a workflow worker does."""

    def __init__(self, d: WorkflowDriver, cls: type, key: int, checkpoint: bool = False) -> None:
        self.d, self.key, self.checkpoint = d, key, checkpoint
        self.definition = WorkflowDefinition.of(cls)

        async def skip(seconds: float) -> None:  # backoffs in the worker: jump, do not wait
            d.clock.advance(int(seconds * 1000))

        self.runner = LocalActivityRunner(clock=d.clock, sleep=skip)
        self.instance: WorkflowInstance | None = None
        self.seen = 0

    def answer(self):
        history = self.d.history(self.key)
        if self.instance is None:
            self.instance = WorkflowInstance(self.definition, history, local_activities=self.runner,
                                             checkpoint_local_activities=self.checkpoint)
        else:
            self.instance.extend(history[self.seen:])
        self.seen = len(history)
        outcome = self.instance.activate()
        assert not outcome.failed, outcome.failure
        extra = {"attributes": orjson.dumps({"force_create_new_workflow_task": True}).decode()} \
            if outcome.force_new_task else {}
        self.d.send("TASK_COMPLETE", self.key, scheduled_event_id=self.d.task(self.key)["scheduled_event_id"],
                    identity="wf-worker", attempt=0, commands=orjson.dumps(outcome.commands).decode(), **extra)
        return outcome


@pytest.fixture
def d(tmp_path):
    CALLS.clear()
    FAILURES_LEFT["n"] = 0
    driver = WorkflowDriver(tmp_path / "wf")
    yield driver
    driver.close()


def _result(d, key):
    return orjson.loads(attrs(d.history(key), "WORKFLOW_EXECUTION_COMPLETED")[0]["result"])


def test_a_one_step_workflow_completes_in_one_task_with_a_marker_and_replays_without_calling_again(d):
    key, _ = d.start(input="[41]")
    outcome = Worker(d, OneStep, key).answer()
    assert [c["type"] for c in outcome.commands] == ["RECORD_MARKER", "COMPLETE_WORKFLOW_EXECUTION"]
    assert d.types(key) == ["WORKFLOW_EXECUTION_STARTED", "WORKFLOW_TASK_SCHEDULED", "WORKFLOW_TASK_STARTED",
                            "WORKFLOW_TASK_COMPLETED", "MARKER_RECORDED", "WORKFLOW_EXECUTION_COMPLETED"]
    (marker,) = attrs(d.check(key), "MARKER_RECORDED")
    assert marker["marker_name"] == "LocalActivity"
    details = marker["details"]
    assert (details["seq"], details["activity_id"], details["activity_type"], details["attempt"]) == \
        ("1", "1", "add_one", 1)
    assert _result(d, key) == 42 and CALLS == [("add_one", 1)]
    Replayer(workflows=[OneStep]).replay(d.history(key))
    assert CALLS == [("add_one", 1)], "replay takes the marker's result"


def test_short_backoffs_are_retried_in_the_worker_within_the_task(d):
    FAILURES_LEFT["n"] = 2
    key, _ = d.start(input="[1]")
    start = d.clock.now_ms()
    Worker(d, OneStep, key).answer()
    assert CALLS == [("add_one", 1), ("add_one", 2), ("add_one", 3)]
    assert d.clock.now_ms() - start == 3 * S  # 1 s then 2 s, waited out in the worker
    assert attrs(d.check(key), "MARKER_RECORDED")[0]["details"]["attempt"] == 3
    assert _result(d, key) == 2
    Replayer(workflows=[OneStep]).replay(d.history(key))


def test_a_backoff_over_the_local_retry_threshold_becomes_a_durable_timer(d):
    FAILURES_LEFT["n"] = 1
    key, _ = d.start(input="[1]")
    worker = Worker(d, LongBackoff, key)
    first = worker.answer()
    assert [c["type"] for c in first.commands] == ["RECORD_MARKER", "START_TIMER"]
    backoff = first.commands[0]["details"]
    assert (backoff["attempt"], backoff["backoff_ms"], backoff["failure"]["type"]) == (1, 30 * S, "RuntimeError")
    assert first.commands[1]["start_to_fire_timeout_ms"] == 30 * S
    d.run_until(d.clock.now_ms() + 30 * S)
    second = worker.answer()
    assert [c["type"] for c in second.commands] == ["RECORD_MARKER", "COMPLETE_WORKFLOW_EXECUTION"]
    assert (second.commands[0]["details"]["seq"], second.commands[0]["details"]["attempt"]) == ("3", 2)
    assert CALLS == [("add_one", 1), ("add_one", 2)] and _result(d, key) == 2
    Replayer(workflows=[LongBackoff]).replay(d.check(key))
    assert len(CALLS) == 2


def test_schedule_to_close_bounds_every_attempt(d):
    FAILURES_LEFT["n"] = 100
    key, _ = d.start(input="[1]")
    Worker(d, Bounded, key).answer()
    assert [a for _, a in CALLS] == [1, 2, 3, 4]  # at 0, 1, 2 and 3 s; a fifth would start after 3.5 s
    assert _result(d, key) == ["TIMEOUT", "TimeoutError", "SCHEDULE_TO_CLOSE", "ApplicationError"]
    Replayer(workflows=[Bounded]).replay(d.check(key))


def test_a_failure_surfaces_as_activity_error_caused_by_the_application_error(d):
    key, _ = d.start(input="[1]")
    Worker(d, Refusing, key).answer()
    assert _result(d, key) == ["refuse", "NON_RETRYABLE_FAILURE", "ApplicationError", "Refused"]
    Replayer(workflows=[Refusing]).replay(d.check(key))


def test_a_changed_local_activity_type_is_non_determinism(d):
    key, _ = d.start(input="[1]")
    Worker(d, StepThenSleep, key).answer()
    d.run_until(d.clock.now_ms() + 3_600 * S)
    history = d.history(key)
    assert history[-1]["event_type"] == "WORKFLOW_TASK_SCHEDULED"
    changed = WorkflowInstance(WorkflowDefinition.of(StepThenSleepChanged), history).activate()
    assert changed.cause == "NON_DETERMINISTIC_ERROR"
    assert "add_one" in changed.failure["message"] and "add_two" in changed.failure["message"]
    assert not WorkflowInstance(WorkflowDefinition.of(StepThenSleep), history).activate().failed
    assert CALLS == [("add_one", 1)]


def test_a_local_activity_past_the_task_timeout_heartbeats_the_task(d):
    RELEASE.clear()
    key, _ = d.start(input="[7]", workflow_task_timeout_ms=500)
    worker = Worker(d, Slow, key)
    beat = worker.answer()
    assert beat.force_new_task and beat.commands == []
    assert d.types(key)[-1] == "WORKFLOW_TASK_SCHEDULED", "the engine scheduled the next task at once"
    RELEASE.set()
    done = worker.answer()
    assert [c["type"] for c in done.commands] == ["RECORD_MARKER", "COMPLETE_WORKFLOW_EXECUTION"]
    assert _result(d, key) == 7
    Replayer(workflows=[Slow]).replay(d.check(key))


def test_a_cancelled_call_records_nothing_and_does_not_hold_the_task(d):
    key, _ = d.start(input="[1]")
    outcome = Worker(d, Abandons, key).answer()
    assert [c["type"] for c in outcome.commands] == ["COMPLETE_WORKFLOW_EXECUTION"]
    assert _result(d, key) == "given up"
    Replayer(workflows=[Abandons]).replay(d.check(key))


def test_an_attempt_after_a_timer_that_ran_past_schedule_to_close_times_out_without_running(d):
    FAILURES_LEFT["n"] = 1
    key, _ = d.start(input="[1]")
    worker = Worker(d, LongBackoffBounded, key)
    assert [c["type"] for c in worker.answer().commands] == ["RECORD_MARKER", "START_TIMER"]
    d.run_until(d.clock.now_ms() + 30 * S)  # the timer fires ...
    d.clock.advance(15 * S)  # ... and the next task runs 45 s after the first schedule
    worker.answer()
    assert CALLS == [("add_one", 1)]
    assert _result(d, key) == ["TIMEOUT", "SCHEDULE_TO_CLOSE"]
    Replayer(workflows=[LongBackoffBounded]).replay(d.check(key))


def test_with_checkpoints_each_marker_is_on_the_log_before_the_next_local_activity_runs(d):
    key, _ = d.start(input="[1]")
    worker = Worker(d, TwoSteps, key, checkpoint=True)
    first = worker.answer()
    assert first.force_new_task and [c["details"]["activity_type"] for c in first.commands] == ["add_one"]
    assert d.types(key)[-2:] == ["MARKER_RECORDED", "WORKFLOW_TASK_SCHEDULED"]
    second = worker.answer()
    assert not second.force_new_task
    assert [c["type"] for c in second.commands] == ["RECORD_MARKER", "COMPLETE_WORKFLOW_EXECUTION"]
    assert _result(d, key) == 4 and CALLS == [("add_one", 1)]
    Replayer(workflows=[TwoSteps]).replay(d.check(key))


def test_without_checkpoints_both_steps_are_one_task(d):
    key, _ = d.start(input="[1]")
    outcome = Worker(d, TwoSteps, key).answer()
    assert [c["type"] for c in outcome.commands] == ["RECORD_MARKER", "RECORD_MARKER", "COMPLETE_WORKFLOW_EXECUTION"]


def test_start_to_close_bounds_an_attempt_and_a_timeout_the_function_raises_is_its_own_failure(d):
    key, _ = d.start(input="[1]")
    Worker(d, TimesOut, key).answer()
    assert _result(d, key) == [["MAXIMUM_ATTEMPTS_REACHED", "TimeoutError", "START_TO_CLOSE"],
                               ["MAXIMUM_ATTEMPTS_REACHED", "ApplicationError", "TimeoutError"]]
    (hung, raised) = attrs(d.check(key), "MARKER_RECORDED")
    assert (hung["details"]["attempt"], raised["details"]["attempt"]) == (2, 2)


@dataclasses.dataclass
class Parcel:
    order: str
    weight_g: int


@activity.defn
def weigh(order: str) -> Parcel:
    return Parcel(order, 1200)


@workflow.defn(name="Order")  # the driver starts "Order" runs
class Weighs:
    @workflow.run
    async def run(self, order: str) -> str:
        parcel = await workflow.execute_local_activity(weigh, order, start_to_close_timeout=timedelta(seconds=5))
        # A Parcel, by weigh's return annotation, on first execution and on replay alike.
        return f"{type(parcel).__name__} {parcel.order} {parcel.weight_g}"


def test_a_local_activity_result_is_decoded_by_the_functions_return_annotation(d):
    key, _ = d.start(input='["o-1"]')
    Worker(d, Weighs, key).answer()
    assert _result(d, key) == "Parcel o-1 1200"
    Replayer(workflows=[Weighs]).replay(d.history(key))
