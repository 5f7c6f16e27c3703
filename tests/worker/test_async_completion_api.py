"""The parts of asynchronous completion that need no broker: task tokens, raise_complete_async
in a test environment and in a local activity, and the handle's argument checks."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from streamproc import activity
from streamproc.activity.context import ActivityContext, reset_current, set_current
from streamproc.client import AsyncActivityIDReference, Client
from streamproc.protocol.task_tokens import TaskToken
from streamproc.testing import ActivityEnvironment


def test_a_task_token_round_trips_and_names_namespace_key_and_attempt():
    token = TaskToken("orders", 2 ** 52 + 17, 3, "charge-1")
    assert TaskToken.decode(token.encode()) == token
    assert TaskToken.decode(bytearray(token.encode())) == token


@pytest.mark.parametrize("raw, problem", [
    (b"\x00\x01", "not JSON"),
    (b'{"v": 1, "ns": "n", "key": 5}', "no 'attempt' field"),
    (b'{"v": 9, "ns": "n", "key": 5, "attempt": 1}', "version 9, expected 1"),
    (b'{"v": 1, "ns": "n", "key": -5, "attempt": 1}', "bad key or attempt"),
    (b'{"v": 1, "ns": "n", "key": 5, "attempt": 0}', "bad key or attempt"),
    (b"[1, 2]", "list indices"),
])
def test_bytes_that_are_no_task_token_say_what_is_wrong(raw, problem):
    with pytest.raises(ValueError, match=f"not a streamproc task token \\({problem}"):
        TaskToken.decode(raw)


def test_a_task_token_must_be_bytes():
    with pytest.raises(TypeError, match="task_token must be bytes"):
        TaskToken.decode("abc")  # type: ignore[arg-type]


@activity.defn
async def hand_on() -> str:
    activity.raise_complete_async()


def test_raise_complete_async_in_the_activity_environment_as_temporal_tests_expect():
    env = ActivityEnvironment()
    assert env.info.task_token == b"test"
    with pytest.raises(activity._CompleteAsyncError):
        asyncio.run(env.run(hand_on))


def test_a_local_activity_cannot_complete_asynchronously():
    info = dataclasses.replace(ActivityEnvironment.default_info(), is_local=True)
    token = set_current(ActivityContext(info, lambda details: None))
    try:
        with pytest.raises(RuntimeError, match="local activities cannot complete asynchronously"):
            activity.raise_complete_async()
    finally:
        reset_current(token)


def test_handles_check_their_arguments_before_anything_is_sent():
    client = Client("127.0.0.1:1", "orders")  # never connects: nothing is sent here
    try:
        token = TaskToken("orders", 5, 1, "a").encode()
        assert client.get_async_activity_handle(task_token=token).task_token == token
        with pytest.raises(ValueError, match="not both"):
            client.get_async_activity_handle(task_token=token, activity_id="a")
        with pytest.raises(ValueError, match="of namespace 'payments', this client's is 'orders'"):
            client.get_async_activity_handle(task_token=TaskToken("payments", 5, 1).encode())
        by_ids = client.get_async_activity_handle(workflow_id="w", run_id=None, activity_id="a")
        assert by_ids.id_reference == AsyncActivityIDReference("w", None, "a") and by_ids.task_token is None
        with pytest.raises(ValueError, match="needs task_token, or workflow_id and activity_id"):
            client.get_async_activity_handle(activity_id="a")
    finally:
        client._producer.flush(0)


def test_temporals_rpc_metadata_is_accepted_empty_and_refused_by_name_otherwise():
    client = Client("127.0.0.1:1", "orders")
    try:
        handle = client.get_async_activity_handle(workflow_id="w", run_id=None, activity_id="a")
        with pytest.raises(NotImplementedError, match="rpc_metadata is not implemented .*gRPC metadata"):
            asyncio.run(handle.complete("x", rpc_metadata={"k": "v"}))
    finally:
        client._producer.flush(0)
