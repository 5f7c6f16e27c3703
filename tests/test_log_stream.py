"""One log stream: the standard library's records and librdkafka's lines come out of
structlog in the one format, with no raw `%3|...` lines; Maven's downloads are counted for
the first broker start's progress lines."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson

from streamproc.devenv.broker_install import DownloadTally

ROOT = Path(__file__).resolve().parents[1]

PROGRAM = """
import logging, time
from confluent_kafka import Consumer
from streamproc.kafka.config import consumer_config
from streamproc.logs import configure_logging

configure_logging("json")
logging.getLogger("some.library").warning("disk %s is %d%% full", "/var", 93)
consumer = Consumer(consumer_config("127.0.0.1:1", "g"))   # nothing listens there
consumer.subscribe(["t"])
deadline = time.monotonic() + 3
while time.monotonic() < deadline:
    consumer.poll(0.2)
consumer.close()
"""


def test_standard_logging_and_librdkafka_lines_are_structlog_json_lines():
    result = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
    assert "%3|" not in result.stderr and "%4|" not in result.stderr
    lines = [orjson.loads(line) for line in result.stderr.splitlines()]  # every line is JSON
    assert {"event": "disk /var is 93% full", "logger": "some.library", "level": "warning"}.items() <= lines[0].items()
    kafka = [line for line in lines if line["event"] in ("kafka_client_log", "kafka_client_error")]
    assert kafka and all(line["client"] == "g" for line in kafka)
    # one line per kind per interval, however often the client retried in 3 s
    assert len(kafka) < 10


def test_maven_downloads_are_counted_and_reported_once_per_interval():
    tally = DownloadTally()
    assert tally.feed("[INFO] Downloading from central: https://repo.maven.apache.org/a.jar")
    assert tally.feed("[INFO] Downloaded from central: https://repo.maven.apache.org/a.jar (1.5 MB at 3.0 MB/s)")
    assert tally.feed("Downloaded from central: https://repo.maven.apache.org/b.pom (12 kB at 40 kB/s)")
    assert not tally.feed("[INFO] BUILD SUCCESS")
    assert (tally.files, tally.bytes) == (2, 1_512_000.0)
    assert not tally.due(0.0, 3.0)  # the interval starts at the first file
    assert not tally.due(2.0, 3.0)
    assert tally.due(3.5, 3.0)
    assert not tally.due(10.0, 3.0)  # nothing new since
    tally.feed("Downloaded from central: https://x/c.jar (1,024 B at 1 kB/s)")
    assert tally.due(10.0, 3.0) and tally.bytes == 1_513_024.0
