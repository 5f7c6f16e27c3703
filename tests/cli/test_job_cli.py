"""`streamproc job ...` against a real broker and an engine in this process: commands the
engine answers print its answer, a refusal is one line and exit 1, `--no-wait` only sends."""

from __future__ import annotations

import orjson
import pytest

from tests.support.cli import cli_of, cli_settings
from tests.support.engines import EngineThread

pytestmark = pytest.mark.kafka


@pytest.fixture
def job(bootstrap, namespace, tmp_path, monkeypatch):
    settings = cli_settings(bootstrap, namespace, tmp_path, monkeypatch, "cli-jobs")
    with EngineThread(settings, idle_poll_ms=10):
        yield cli_of("job")


def test_create_prints_the_job_key_and_answers_are_printed_or_refused(job):
    key = int(job("create", "payments", "--payload", '{"amount": 5}', "--timeout", "1h30m"))
    assert key > 0
    created = orjson.loads(job("create", "payments", "--retries", "0", "-o", "json"))
    assert created["intent"] == "CREATED" and created["retries"] == 0 and created["key"] != key

    refused = job("complete", str(key), "1", "--result", '{"ok": true}', code=1)  # never started
    assert refused.count("\n") == 1 and refused.startswith("Error: rejected: INVALID_STATE")

    assert job("cancel", str(key)).strip() == f"job {key} CANCELED"
    refused = job("cancel", str(key), code=1)  # gone
    assert "rejected: NOT_FOUND" in refused and "Traceback" not in refused

    assert job("update-retries", str(created["key"]), "2", "-o", "jsonl").count("\n") == 1


def test_no_wait_only_sends(job):
    request_id = job("create", "payments", "--no-wait").strip()
    assert len(request_id) == 32  # the request id its CREATED event will carry, not a key
    assert job("cancel", "12345", "--no-wait") == ""  # refused later, by the engine, unheard


def test_list_describe_and_incidents(job):
    from streamproc.client.client import Client
    from streamproc.settings import Settings

    kept = int(job("create", "refunds", "--retries", "0"))
    failing = int(job("create", "refunds", "--retries", "0", "--payload", '{"n": 2}'))
    settings = Settings.from_env()
    with Client(settings.bootstrap, settings.namespace) as client:  # a worker's START, as a worker sends it
        client.start_job(failing, 1, "w-1")
    import time
    deadline = time.monotonic() + 30
    while '"STARTED"' not in job("describe", str(failing), "-o", "json") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "FAILED" in job("fail", str(failing), "1", "--retries", "0", "--message", "card declined")

    listed = orjson.loads(job("list", "-o", "json"))
    assert [(j["key"], j["state"]) for j in listed] == [(failing, "FAILED"), (kept, "ACTIVATABLE")]
    assert [j["key"] for j in orjson.loads(job("list", "--state", "ACTIVATABLE", "-o", "json"))] == [kept]
    table = job("list", "--type", "refunds").splitlines()
    assert table[0].split()[:3] == ["KEY", "TYPE", "STATE"] and len(table) == 3

    described = orjson.loads(job("describe", str(failing), "-o", "json"))
    assert described["state"] == "FAILED" and described["error_message"] == "card declined"
    assert [e["intent"] for e in described["events"]] == ["CREATED", "STARTED", "FAILED"]
    assert "LastError    card declined" in job("describe", str(failing))
    assert "no job 7 on the events topic" in job("describe", "7", code=1)

    incidents = cli_of("incident")
    (open_incident,) = orjson.loads(incidents("list", "-o", "json"))
    assert open_incident["job_key"] == failing and open_incident["open"]
    job("update-retries", str(failing), "1")
    assert orjson.loads(incidents("list", "-o", "json")) == []
    assert "RESOLVED" in incidents("list", "--all").splitlines()[0]
