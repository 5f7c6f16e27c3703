"""The typed activity meta reads and writes the documents the engine has always stored,
byte for byte (`fixtures/activity_documents.json`: every shape the processor tests
produced, a client's and a workflow's activities, dispatched or waiting, timers armed or
not, started with or without a request id, captured before the meta was typed)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from streamproc.state.activities import ActivityMeta, ArmedTimer, WorkflowOwner

DOCUMENTS = [orjson.loads(d)["meta"] for d in
             orjson.loads((Path(__file__).parent / "fixtures/activity_documents.json").read_bytes())]


@pytest.mark.parametrize("meta", DOCUMENTS, ids=range(len(DOCUMENTS)))
def test_a_stored_activity_meta_round_trips_byte_for_byte(meta):
    assert orjson.dumps(ActivityMeta.from_json(meta).to_json()) == orjson.dumps(meta)


def test_the_fixture_covers_owners_timers_and_start_request_ids():
    assert any("workflow" in m for m in DOCUMENTS) and any("workflow" not in m for m in DOCUMENTS)
    assert any(m["timer"] is None for m in DOCUMENTS) and any(m["timer"] for m in DOCUMENTS)
    assert any("start_request_id" not in m for m in DOCUMENTS)
    assert any(m.get("start_request_id") for m in DOCUMENTS)


def test_fields_are_typed():
    meta = ActivityMeta.from_json(next(m for m in DOCUMENTS if "workflow" in m and m["timer"]))
    assert isinstance(meta.workflow, WorkflowOwner) and isinstance(meta.timer, ArmedTimer)
    assert meta.timer.kind in ("DISPATCH", "TIME_OUT")
