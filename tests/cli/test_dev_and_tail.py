"""What `streamproc dev` says once ready, and what `events tail` says it waits on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamproc.cli.dev_summary import dev_summary
from streamproc.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def test_dev_says_what_runs_where_and_what_to_try():
    settings = Settings(bootstrap="127.0.0.1:19092", namespace="streamproc", engine_id="e1", state_dir=Path("/s"))
    text = dev_summary(settings, broker_dir="/b", example=True, metrics_port=9464, ready_after_s=4.0)
    assert "  broker     127.0.0.1:19092 (started here, data in /b; stopped on Ctrl-C)" in text
    assert "  engine     e1, state in /s" in text and "http://localhost:9464/metrics" in text
    assert "job worker on task queue 'hello'" in text
    assert "ready in 4.0 s; try, in another shell:" in text
    assert "\n  streamproc job create hello --payload '{\"name\": \"you\"}'\n" in text  # the defaults: no flags
    other = Settings(bootstrap="10.0.0.5:9092", namespace="team-a", engine_id="e1", state_dir=Path("/s"))
    text = dev_summary(other, broker_dir=None, example=False, metrics_port=0, ready_after_s=1)
    assert "10.0.0.5:9092 (already running)" in text and "metrics    off" in text
    assert "\n  streamproc --bootstrap 10.0.0.5:9092 --namespace team-a events tail\n" in text


@pytest.mark.kafka
def test_events_tail_says_what_it_waits_on(bootstrap, namespace):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "STREAMPROC_LOG_FORMAT": "json"}
    process = subprocess.Popen([sys.executable, "-m", "streamproc", "--bootstrap", bootstrap, "--namespace", namespace,
                                "events", "tail", "-o", "jsonl"], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        line = ""
        while "waiting for events" not in line and time.monotonic() < deadline:
            line = process.stderr.readline()
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    assert line.strip() == (f"waiting for events on {namespace}.events at {bootstrap} (new ones only; Ctrl-C stops)")
    assert process.returncode == 0 and "Traceback" not in err
