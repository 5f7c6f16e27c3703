"""The activity API without a worker or a broker: @defn, info(), heartbeat(), cancellation,
and which attempt a thread or an asyncio task sees."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from datetime import UTC, datetime, timedelta

import pytest

from streamproc import activity
from streamproc.activity.context import (
    ActivityContext,
    CancelReason,
    info_from_task,
    reset_current,
    set_current,
)
from streamproc.activity.definition import ActivityDefinition
from streamproc.activity.payloads import decode_args, encode_args
from streamproc.protocol.task_tokens import TaskToken


def task_value(**overrides):
    value = {"activity_id": "a-1", "activity_type": "charge", "task_queue": "payments", "attempt": 2,
             "heartbeat_details": '[3, {"page": 7}]', "first_scheduled_time_ms": 1_700_000_000_000,
             "scheduled_time_ms": 1_700_000_001_500, "schedule_to_close_timeout_ms": 0,
             "start_to_close_timeout_ms": 10_000, "heartbeat_timeout_ms": 2_000}
    value.update(overrides)
    return value


def context(sent=None, is_async=False, **overrides) -> ActivityContext:
    sent = sent if sent is not None else []
    return ActivityContext(info_from_task(task_value(**overrides), 1_700_000_002_000), sent.append, is_async)


def test_defn_names_the_activity_type_and_tells_sync_from_async():
    @activity.defn
    def charge(amount):
        return amount

    @activity.defn(name="refund-v2")
    async def refund(amount):
        return -amount

    assert ActivityDefinition.of(charge) == ActivityDefinition("charge", charge, False)
    assert ActivityDefinition.of(refund).name == "refund-v2" and ActivityDefinition.of(refund).is_async
    assert charge(5) == 5  # still a plain function
    with pytest.raises(TypeError, match="is not an activity"):
        ActivityDefinition.of(lambda: None)
    with pytest.raises(ValueError, match="non-empty"):
        activity.defn(name="")(lambda: None)


def test_info_decodes_the_task_record():
    info = info_from_task(task_value(), 1_700_000_002_000)
    assert info == activity.Info(
        activity_id="a-1", activity_type="charge", task_queue="payments", attempt=2,
        heartbeat_details=(3, {"page": 7}),
        scheduled_time=datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC),
        current_attempt_scheduled_time=datetime(2023, 11, 14, 22, 13, 21, 500_000, tzinfo=UTC),
        started_time=datetime(2023, 11, 14, 22, 13, 22, tzinfo=UTC),
        schedule_to_close_timeout=None, start_to_close_timeout=timedelta(seconds=10),
        heartbeat_timeout=timedelta(seconds=2))
    assert info_from_task(task_value(heartbeat_details=None), 0).heartbeat_details == ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.attempt = 3


def test_info_of_a_workflows_activity_names_the_workflow_and_has_a_task_token():
    value = task_value(workflow_id="order-1", run_id="r-9", workflow_type="Order")
    info = info_from_task(value, 0, namespace="shop", key=42)
    assert (info.workflow_id, info.workflow_run_id, info.workflow_type, info.workflow_namespace) == (
        "order-1", "r-9", "Order", "shop")
    assert TaskToken.decode(info.task_token) == TaskToken("shop", 42, 2, "a-1")
    plain = info_from_task(task_value(), 0)  # a client's activity; no key known: no token
    assert plain.workflow_id is None and plain.task_token == b""


def test_outside_an_activity_the_api_says_so():
    for call in (activity.info, activity.heartbeat, activity.is_cancelled):
        with pytest.raises(RuntimeError, match="not in an activity"):
            call()


def test_heartbeat_passes_details_until_cancelled_then_raises_in_sync_code():
    sent = []
    ctx = context(sent)
    token = set_current(ctx)
    try:
        activity.heartbeat("step", 1)
        assert sent == [("step", 1)] and not activity.is_cancelled()
        assert ctx.cancel(CancelReason.CANCEL_REQUESTED)
        assert not ctx.cancel(CancelReason.ATTEMPT_OVER)  # the first reason stays
        assert activity.is_cancelled() and ctx.cancel_reason == CancelReason.CANCEL_REQUESTED
        assert activity.wait_for_cancelled_sync(timedelta(0))
        with pytest.raises(activity.CancelledError):
            activity.heartbeat("step", 2)
    finally:
        reset_current(token)


def test_each_thread_sees_its_own_attempt():
    seen = {}

    def run(ctx: ActivityContext, name: str, ready: threading.Barrier) -> None:
        token = set_current(ctx)
        ready.wait()  # both attempts are current at once
        seen[name] = activity.info().activity_id
        reset_current(token)

    barrier = threading.Barrier(2)
    threads = [threading.Thread(target=run, args=(context(activity_id=name), name, barrier)) for name in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == {"a": "a", "b": "b"}


def test_each_task_sees_its_own_attempt_and_async_code_waits_for_cancellation():
    async def one(ctx: ActivityContext, gate: asyncio.Event) -> tuple[str, int]:
        set_current(ctx)  # as the worker does, inside the task's own context
        await gate.wait()
        activity.heartbeat("x")  # async code is cancelled through its task, not here
        await activity.wait_for_cancelled()
        return activity.info().activity_id, activity.info().attempt

    async def main():
        gate = asyncio.Event()
        ctxs = [context(activity_id="a", attempt=1, is_async=True), context(activity_id="b", attempt=5, is_async=True)]
        tasks = [asyncio.create_task(one(c, gate)) for c in ctxs]
        await asyncio.sleep(0)
        gate.set()
        await asyncio.sleep(0)
        for c in ctxs:
            threading.Thread(target=c.cancel, args=(CancelReason.CANCEL_REQUESTED,)).start()
        return await asyncio.wait_for(asyncio.gather(*tasks), 10)

    assert asyncio.run(main()) == [("a", 1), ("b", 5)]


def test_arguments_travel_as_a_list_and_spread():
    assert decode_args(encode_args(("o-1", 5))) == ("o-1", 5)
    assert decode_args(encode_args(([1, 2],))) == ([1, 2],)  # one list argument stays whole
    assert decode_args("null") == () and decode_args('{"a": 1}') == ({"a": 1},)
