"""Temporal's module names and helpers, without a broker: `streamproc.common` and
`streamproc.exceptions` re-export the one definition of each class, `workflow.logger` adds
the run's details and is silent on replay, `activity.logger` adds the attempt's,
`workflow.unsafe` is accepted, and what we do not implement says so by name."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from datetime import timedelta

import pytest

import streamproc.client.errors
import streamproc.exceptions as exceptions
import streamproc.workflow.errors
from streamproc import activity, common, workflow
from streamproc.semantics.retry import RetryPolicy
from streamproc.semantics.workflow_ids import QueryRejectCondition, WorkflowIdConflictPolicy, WorkflowIdReusePolicy
from streamproc.testing import ActivityEnvironment
from streamproc.workflow.run_info import Info, ParentInfo
from tests.workflow.history import Run

SECOND = timedelta(seconds=1)


def test_common_names_are_the_classes_streamproc_defines():
    assert common.RetryPolicy is RetryPolicy is workflow.RetryPolicy is activity.RetryPolicy
    assert common.WorkflowIDReusePolicy is WorkflowIdReusePolicy
    assert common.WorkflowIDConflictPolicy is WorkflowIdConflictPolicy
    assert common.QueryRejectCondition is QueryRejectCondition
    assert common.WorkflowIDReusePolicy.REJECT_DUPLICATE.value == 3  # Temporal's numbers


def test_exceptions_are_one_definition_each_whatever_module_names_them():
    for name in ("ApplicationError", "ActivityError", "CancelledError", "TimeoutError", "FailureError"):
        assert getattr(workflow, name) is getattr(activity, name) is getattr(exceptions, name)
    for name in ("WorkflowAlreadyStartedError", "WorkflowFailureError"):
        assert getattr(streamproc.client.errors, name) is getattr(exceptions, name)
    assert workflow.ChildWorkflowError is exceptions.ChildWorkflowError
    assert streamproc.workflow.errors.NonDeterminismError is exceptions.NonDeterminismError
    assert issubclass(exceptions.ApplicationError, exceptions.TemporalError)
    assert issubclass(exceptions.TerminatedError, exceptions.FailureError)


def test_is_cancelled_exception_sees_through_activity_and_child_errors():
    wrapped = exceptions.ActivityError("Activity task canceled", activity_id="1", activity_type="a",
                                       scheduled_event_id=5, started_event_id=6, identity="w",
                                       retry_state=exceptions.RetryState.CANCEL_REQUESTED)
    wrapped.__cause__ = exceptions.CancelledError()
    assert exceptions.is_cancelled_exception(wrapped)
    assert exceptions.is_cancelled_exception(asyncio.CancelledError())
    assert not exceptions.is_cancelled_exception(exceptions.ApplicationError("no"))


@pytest.mark.parametrize("module, name, feature", [
    (workflow, "LocalActivityConfig", "LocalActivityConfig"),
    (workflow, "upsert_search_attributes", "search attributes"),
    (activity, "metric_meter", "SDK metric meters"),
    (common, "SearchAttributeKey", "search attributes"),
    (exceptions, "ApplicationErrorCategory", "application error categories"),
])
def test_temporal_names_we_lack_raise_not_implemented_naming_the_feature(module, name, feature):
    with pytest.raises(NotImplementedError, match=f"{module.__name__}.{name} is not implemented by streamproc: {feature}"):
        getattr(module, name)


def test_importing_a_missing_temporal_name_fails_at_the_import_and_typos_stay_attribute_errors():
    with pytest.raises(NotImplementedError, match="SearchAttributeKey"):
        from streamproc.common import SearchAttributeKey  # noqa: F401
    with pytest.raises(AttributeError, match="has no attribute 'RetryPolicee'"):
        common.RetryPolicee  # noqa: B018


def test_unsafe_imports_passed_through_is_accepted_outside_and_inside_workflows():
    with workflow.unsafe.imports_passed_through():
        import json  # noqa: F401
    assert not workflow.unsafe.in_sandbox() and not workflow.unsafe.is_replaying()
    assert not workflow.in_workflow() and not activity.in_activity()


@activity.defn
def greet(name: str) -> str:
    return f"Hello, {name}!"


@workflow.defn
class Logging:
    @workflow.run
    async def run(self, name: str) -> str:
        with workflow.unsafe.imports_passed_through():
            pass
        workflow.logger.info("starting for %s", name)
        assert workflow.in_workflow() and workflow.time() == workflow.now().timestamp()
        greeting = await workflow.execute_activity(greet, name, start_to_close_timeout=SECOND)
        workflow.logger.info("got %s", greeting)
        return greeting


def _lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "streamproc.workflow"]


def test_workflow_logger_adds_the_run_and_is_silent_while_replaying(caplog):
    caplog.set_level(logging.INFO, logger="streamproc.workflow")
    run = Run(Logging, "Ada", workflow_id="greet-1", run_id="run-7", task_queue="greetings")
    run.step()
    details = {"attempt": 1, "namespace": "", "run_id": "run-7", "task_queue": "greetings",
               "workflow_id": "greet-1", "workflow_type": "Logging"}
    assert _lines(caplog) == [f"starting for Ada ({details})"]
    assert caplog.records[-1].temporal_workflow == details

    run.history.activity_completed("1", "Hello, Ada!")
    run.history.schedule_task()
    caplog.clear()
    # A worker without the run cached replays the first task's code, then runs the new one:
    # the replayed line is not logged again, the new one is.
    outcome = run.replay()
    assert outcome.commands[0]["type"] == "COMPLETE_WORKFLOW_EXECUTION"
    assert _lines(caplog) == [f"got Hello, Ada! ({details})"]


def test_workflow_logger_can_log_during_replay_when_asked(caplog):
    caplog.set_level(logging.INFO, logger="streamproc.workflow")
    run = Run(Logging, "Ada")
    run.step()
    run.history.activity_completed("1", "Hello, Ada!")
    run.history.schedule_task()
    caplog.clear()
    workflow.logger.log_during_replay = True
    try:
        run.replay()
    finally:
        workflow.logger.log_during_replay = False
    assert [line.split(" (")[0] for line in _lines(caplog)] == ["starting for Ada", "got Hello, Ada!"]


def test_workflow_info_has_temporals_fields():
    started = {"event_time_ms": 1_000, "attributes": {
        "workflow_id": "child-1", "workflow_type": "Child", "task_queue": "q", "attempt": 2,
        "original_execution_run_id": "r-2", "retry_policy": {"maximum_attempts": 3},
        "parent_workflow_execution": {"workflow_id": "parent-1", "run_id": "r-1"}}}
    info = Info.from_started_event(started, namespace="shop")
    assert info.parent == ParentInfo(namespace="shop", run_id="r-1", workflow_id="parent-1")
    assert info.retry_policy.maximum_attempts == 3
    assert info.namespace == "shop" and info.workflow_start_time == info.start_time
    assert info.logger_details()["workflow_type"] == "Child"


@activity.defn
def charge(order: str) -> str:
    activity.heartbeat("half way")
    activity.logger.info("charging %s", order, extra={"mine": 1})
    return f"{order} charged on attempt {activity.info().attempt}"


def test_activity_environment_runs_a_sync_activity_with_info_heartbeats_and_logger(caplog):
    caplog.set_level(logging.INFO, logger="streamproc.activity")
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, attempt=3, activity_type="charge")
    beats = []
    env.on_heartbeat = lambda *details: beats.append(details)
    assert env.run(charge, "o-1") == "o-1 charged on attempt 3"
    assert beats == [("half way",)]
    (record,) = [r for r in caplog.records if r.name == "streamproc.activity"]
    assert record.temporal_activity["activity_type"] == "charge" and record.mine == 1
    assert record.getMessage().startswith("charging o-1 ({'activity_id': 'test', 'activity_type': 'charge'")
    assert not activity.in_activity()  # the fake attempt is gone again


def test_activity_environment_cancels_a_sync_activity_at_its_next_heartbeat():
    env = ActivityEnvironment()
    started = threading.Event()

    def wait_to_be_cancelled() -> str:
        started.set()
        while True:
            activity.heartbeat()
            activity.wait_for_cancelled_sync(0.01)

    outcome = []
    thread = threading.Thread(target=lambda: outcome.append(_raised(env.run, wait_to_be_cancelled)))
    thread.start()
    started.wait(10)
    env.cancel()
    thread.join(10)
    assert isinstance(outcome[0], exceptions.CancelledError)


def test_activity_environment_cancels_an_async_activity_task():
    env = ActivityEnvironment()

    async def sleeps_forever() -> None:
        assert activity.info().activity_id == "test"
        await asyncio.sleep(3600)

    async def main() -> None:
        attempt = asyncio.ensure_future(env.run(sleeps_forever))
        await asyncio.sleep(0.01)
        env.cancel()
        with pytest.raises(asyncio.CancelledError):
            await attempt

    asyncio.run(main())


def _raised(fn, *args) -> BaseException | None:
    try:
        fn(*args)
    except BaseException as exc:  # noqa: BLE001 - the test looks at it
        return exc
    return None


@workflow.defn
class ContinuesAsTemporalWrites:
    @workflow.run
    async def run(self, count: int) -> None:
        workflow.continue_as_new(args=[count + 1, "more"], workflow=Logging.run)


def test_continue_as_new_takes_temporals_args_and_workflow_keywords():
    (command,) = Run(ContinuesAsTemporalWrites, 4).step()
    assert command["type"] == "CONTINUE_AS_NEW_WORKFLOW_EXECUTION"
    assert (command["workflow_type"], command["input"]) == ("Logging", '[5,"more"]')
