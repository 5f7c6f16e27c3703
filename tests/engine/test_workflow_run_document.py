"""The typed run reads and writes the documents the engine has always stored, byte for byte.

`fixtures/workflow_run_documents.json` holds run documents of every shape the processor
tests produced (running, closed, a task out, events buffered, activities and timers open
or closed, deadlines armed, retry policies), captured from the engine before runs were
typed: RocksDB and the changelog hold such documents, and both versions must read each
other's.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from streamproc.semantics.workflow_ids import WorkflowExecutionStatus
from streamproc.state.workflow_run import WorkflowRun

DOCUMENTS = [d.encode() for d in orjson.loads((Path(__file__).parent / "fixtures/workflow_run_documents.json").read_bytes())]


def test_the_fixture_covers_the_shapes_that_matter():
    docs = [orjson.loads(d) for d in DOCUMENTS]
    assert any(d["task"] is not None for d in docs) and any(d["buffered"] for d in docs)
    assert any(d["activities"] for d in docs) and any(d["timers"] for d in docs)
    assert any("task_history_from" in d for d in docs) and any("task_history_from" not in d for d in docs)
    assert {d["status"] for d in docs} >= {"RUNNING", "COMPLETED", "FAILED", "TERMINATED"}


@pytest.mark.parametrize("raw", DOCUMENTS, ids=range(len(DOCUMENTS)))
def test_a_stored_run_round_trips_byte_for_byte(raw):
    run = WorkflowRun.from_json(orjson.loads(raw))
    assert orjson.dumps(run.to_json()) == raw


def test_fields_are_typed():
    run = WorkflowRun.from_json(orjson.loads(next(d for d in DOCUMENTS if b'"activities":{"' in d)))
    assert isinstance(run.status, WorkflowExecutionStatus)
    assert all(isinstance(s, int) for s in run.activities)
    assert run.timeouts.as_workflow_timeouts().task.total_seconds() * 1000 == run.timeouts.task_ms
