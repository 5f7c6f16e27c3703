"""What the engine does for a workflow whose worker runs local activities: a task answered
with force_create_new_workflow_task gets a new task at once (Temporal's workflow task
heartbeat), and a marker's details are held to the payload limit."""

from __future__ import annotations

import orjson

from streamproc.engine.processing import Limits
from tests.engine.workflow_driver import attrs

FORCE = orjson.dumps({"force_create_new_workflow_task": True}).decode()

DRIVER_OPTIONS = {"limits": Limits(max_payload_bytes=1000)}


def _complete(d, key, commands, **value):
    d.send("TASK_COMPLETE", key, scheduled_event_id=d.task(key)["scheduled_event_id"], identity="w", attempt=0,
           commands=orjson.dumps(commands).decode(), **value)


def test_a_heartbeat_answer_gets_the_next_task_at_once(d):
    key, _ = d.start()
    _complete(d, key, [], attributes=FORCE)
    assert d.types(key)[-2:] == ["WORKFLOW_TASK_COMPLETED", "WORKFLOW_TASK_SCHEDULED"]
    assert d.task(key) is not None and len(d.workflow_tasks()) == 2


def test_an_answer_without_it_and_nothing_new_leaves_the_run_waiting(d):
    key, _ = d.start()
    _complete(d, key, [])
    assert d.types(key)[-1] == "WORKFLOW_TASK_COMPLETED" and d.task(key) is None


def test_marker_details_over_the_payload_limit_fail_the_task(d):
    key, _ = d.start()
    marker = {"type": "RECORD_MARKER", "marker_name": "LocalActivity", "details": {"result": "x" * 2000}}
    _complete(d, key, [marker])
    (failed,) = attrs(d.history(key), "WORKFLOW_TASK_FAILED")
    assert failed["cause"] == "BAD_RECORD_MARKER_ATTRIBUTES" and "more than the limit of 1000" in \
        failed["failure"]["message"]
