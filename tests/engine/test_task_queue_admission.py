"""Task queues only as the operator allows: a pattern, and a cap per partition.

Every command that names a task queue is refused with INVALID_ARGUMENT, the reason and
the caller's request id when its queue does not match, or would be one too many on the
partition; an admitted queue stays admitted, also after a restart from the same state.
"""

from __future__ import annotations

import orjson
import pytest

from streamproc.clock import ManualClock
from streamproc.engine.processing import Limits
from streamproc.engine.partition import PartitionProcessor
from streamproc.engine.task_queues import TaskQueuePolicy
from streamproc.protocol.records import Record, RecordType
from streamproc.settings import Settings
from tests.engine.harness import Harness
from tests.engine.workflow_driver import S, WorkflowDriver

POLICY = TaskQueuePolicy.parse("orders, payments-*", max_per_partition=3)


def harness(path, policy: TaskQueuePolicy = POLICY) -> Harness:
    h = Harness(path, clock=ManualClock(start_ms=1_000_000))
    h.proc = PartitionProcessor(0, h.db, h.clock, Limits(task_queues=policy))
    h.proc.on_processed = h.checker.processed
    return h


@pytest.fixture
def h(tmp_path):
    harness_ = harness(tmp_path / "p0")
    yield harness_
    harness_.close()


def create_job(h, queue, request_id="req-1"):
    value = {"type": queue, "payload": "{}", "retries": 3, "timeout_ms": 1000}
    (ev,) = h.send(Record.command("JOB", "CREATE", value, request_id=request_id))
    return ev


def schedule_activity(h, queue, activity_id="a1", request_id="req-2"):
    value = {"activity_id": activity_id, "activity_type": "charge", "task_queue": queue, "input": "[]",
             "retry_policy": None, "schedule_to_close_timeout_ms": 0, "schedule_to_start_timeout_ms": 0,
             "start_to_close_timeout_ms": 10 * S, "heartbeat_timeout_ms": 0}
    (ev,) = h.send(Record.command("ACTIVITY_TASK", "SCHEDULE", value, request_id=request_id,
                                  reply_partition=0))
    return ev


def refused(ev, request_id, why):
    assert ev.record_type is RecordType.COMMAND_REJECTION and ev.rejection_type == "INVALID_ARGUMENT"
    assert ev.request_id == request_id
    assert why in ev.rejection_reason, ev.rejection_reason


def test_the_patterns_parse_and_match_as_globs():
    assert POLICY.allowed == ("orders", "payments-*")
    assert POLICY.allows("orders") and POLICY.allows("payments-eu") and POLICY.allows("payments-")
    assert not POLICY.allows("orders2") and not POLICY.allows("Orders") and not POLICY.allows("payments")
    assert TaskQueuePolicy.parse("").allowed == ("*",) and TaskQueuePolicy().allows("anything")


def test_limits_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("STREAMPROC_TASK_QUEUES", "a,b-*")
    monkeypatch.setenv("STREAMPROC_MAX_TASK_QUEUES", "7")
    assert Limits.from_settings(Settings.from_env()).task_queues == TaskQueuePolicy(("a", "b-*"), 7)
    monkeypatch.setenv("STREAMPROC_MAX_TASK_QUEUES", "0")
    with pytest.raises(ValueError, match="STREAMPROC_MAX_TASK_QUEUES must be a positive integer, got '0'"):
        Settings.from_env()


def test_a_job_on_a_queue_that_matches_no_pattern_is_refused_and_writes_no_task(h):
    refused(create_job(h, "made-up", request_id="r-9"), "r-9",
            "task queue 'made-up' is not allowed on this engine (STREAMPROC_TASK_QUEUES allows orders, payments-*)")
    assert h.tasks == []
    assert create_job(h, "payments-eu").intent == "CREATED"
    assert [queue for queue, _ in h.tasks] == ["payments-eu"]


def test_an_activity_on_a_queue_that_matches_no_pattern_is_refused(h):
    refused(schedule_activity(h, "refunds", request_id="r-1"), "r-1", "task queue 'refunds' is not allowed")
    assert h.tasks == []
    assert schedule_activity(h, "orders").intent == "ActivityTaskScheduled"
    assert [queue for queue, _ in h.tasks] == ["orders"]


def test_the_cap_counts_distinct_queues_of_the_partition_and_survives_a_restart(tmp_path):
    h = harness(tmp_path / "cap")
    for queue in ("orders", "payments-1", "payments-2", "orders", "payments-1"):
        assert create_job(h, queue).intent == "CREATED"  # three distinct: at the cap
    refused(schedule_activity(h, "payments-3", request_id="r-4"), "r-4",
            "task queue 'payments-3' would be more than the 3 task queues a partition may have")
    assert create_job(h, "payments-2").intent == "CREATED"  # a known queue is still fine
    h.close()
    h = harness(tmp_path / "cap")  # the same state, as after a restart or a takeover
    refused(create_job(h, "payments-4", request_id="r-5"), "r-5", "would be more than the 3")
    assert create_job(h, "orders").intent == "CREATED"
    h.close()


def test_a_refused_command_takes_no_place_under_the_cap(h):
    value = {"type": "payments-x", "payload": "not json", "retries": 3, "timeout_ms": 1000}
    for i in range(5):
        (ev,) = h.send(Record.command("JOB", "CREATE", {**value, "type": f"payments-{i}"}))
        assert ev.record_type is RecordType.COMMAND_REJECTION
    for queue in ("payments-a", "payments-b", "payments-c"):
        assert create_job(h, queue).intent == "CREATED"


def workflow_driver(tmp_path) -> WorkflowDriver:
    return WorkflowDriver(tmp_path / "wf", limits=Limits(task_queues=POLICY))


def test_a_workflow_start_on_a_refused_queue_answers_the_caller_with_the_reason(tmp_path):
    d = workflow_driver(tmp_path)
    events, (reply,) = d.send("START", request_id="start-1", workflow_id="w1", workflow_type="Order",
                              task_queue="nope", input="[]")
    refused(reply, "start-1", "task queue 'nope' is not allowed")
    assert events[0].request_id == "start-1" and d.workflow_tasks() == [] and d.current_key("w1") is None
    d.close()


def test_a_workflow_task_naming_a_refused_queue_fails_with_temporals_cause(tmp_path):
    d = workflow_driver(tmp_path)
    key, _ = d.start()
    d.complete(key, [{"type": "SCHEDULE_ACTIVITY_TASK", "activity_id": "1", "activity_type": "charge",
                      "task_queue": "elsewhere", "input": "[]", "start_to_close_timeout_ms": 10 * S}])
    failed = [e for e in d.history(key) if e["event_type"] == "WORKFLOW_TASK_FAILED"]
    assert failed[0]["attributes"]["cause"] == "BAD_SCHEDULE_ACTIVITY_ATTRIBUTES"
    assert "task queue 'elsewhere' is not allowed" in orjson.dumps(failed[0]).decode()
    assert d.activity_tasks() == []
    d.close()


def test_continue_as_new_onto_a_refused_queue_fails_the_task_and_onto_an_allowed_one_starts(tmp_path):
    d = workflow_driver(tmp_path)
    key, _ = d.start()
    d.complete(key, [{"type": "CONTINUE_AS_NEW_WORKFLOW_EXECUTION", "task_queue": "other", "input": "[]"}])
    failed = [e for e in d.history(key) if e["event_type"] == "WORKFLOW_TASK_FAILED"]
    assert failed[0]["attributes"]["cause"] == "BAD_CONTINUE_AS_NEW_ATTRIBUTES"
    d.run_until(1_000_000 + 11 * S)  # the failed task is retried after its backoff
    d.complete(key, [{"type": "CONTINUE_AS_NEW_WORKFLOW_EXECUTION", "task_queue": "payments-2",
                      "input": "[]"}])
    assert d.run(key)["status"] == "CONTINUED_AS_NEW"
    assert d.workflow_tasks()[-1].value["task_queue"] == "payments-2"
    d.close()


def test_a_queue_admitted_by_writes_that_were_discarded_or_rewound_is_not_known(tmp_path):
    from streamproc.state.db import PartitionDb, PendingWrites
    from streamproc.state.task_queues import TaskQueues

    db = PartitionDb(tmp_path / "db", 0)
    writes = PendingWrites(db)
    queues = TaskQueues(writes)
    queues.add("orders")
    assert queues.known("orders")  # and kept, for the next command to ask
    writes.discard()  # the command that admitted it failed
    assert not queues.known("orders") and queues.count() == 0
    queues.add("orders")
    writes.accept()
    assert queues.known("orders")
    writes.clear()  # the batch rewound
    assert not queues.known("orders")
    db.close()
