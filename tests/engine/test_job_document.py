"""The typed job reads and writes the documents the engine has always stored, byte for byte.

`fixtures/job_documents.json`: job documents of every shape the processor tests produced
(created, started, failed with and without a backoff, out of retries with an incident,
activatable again), captured from the engine before jobs were typed."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from streamproc.protocol.records import JobIntent
from streamproc.state.jobs import Job, JobState

DOCUMENTS = [d.encode() for d in orjson.loads((Path(__file__).parent / "fixtures/job_documents.json").read_bytes())]


@pytest.mark.parametrize("raw", DOCUMENTS, ids=range(len(DOCUMENTS)))
def test_a_stored_job_round_trips_byte_for_byte(raw):
    assert orjson.dumps(Job.from_json(orjson.loads(raw)).to_json()) == raw


def test_the_fixture_covers_every_state_and_the_optional_keys():
    docs = [orjson.loads(d) for d in DOCUMENTS]
    assert {d["state"] for d in docs} == {s.value for s in JobState}
    assert any("incident_key" in d for d in docs)
    assert any("start_request_id" not in d for d in docs) and any(d.get("start_request_id") is None
                                                                  and "start_request_id" in d for d in docs)


def test_a_closed_job_shows_how_it_closed_on_its_event_only():
    job = Job.from_json(orjson.loads(DOCUMENTS[1]))
    assert job.record(closed_as=JobIntent.COMPLETED)["state"] == "COMPLETED"
    assert job.state is JobState.STARTED and job.to_json()["state"] == "STARTED"
