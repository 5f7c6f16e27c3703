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
