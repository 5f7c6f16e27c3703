"""`streamproc dev` on a broker named by STREAMPROC_BOOTSTRAP: the example jobs and workflows
run to completion, and Ctrl-C stops everything cleanly."""

from __future__ import annotations

import re
import signal
import socket

import pytest

from tests.support.engines import Process, _env
from tests.support.metrics_scrape import Scrape

pytestmark = pytest.mark.kafka


def test_dev_mode_runs_the_example_jobs_and_workflows_then_stops_on_ctrl_c(bootstrap, namespace, tmp_path):
    env = _env(bootstrap, namespace, STREAMPROC_STATE_DIR=str(tmp_path / "state"), STREAMPROC_PARTITIONS="2")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dev = Process(["dev", "--metrics-port", str(port)], env, tmp_path / "dev.log").start()
    try:
        dev.wait_for_log(f"metrics: http://localhost:{port}/metrics", 60)
        dev.wait_for_log("example: created 3 jobs", 90)
        dev.wait_for_log("example: started 2 OrderWorkflow runs", 60)
        for n in (1, 2):
            dev.wait_for_log(f"example: workflow example-order-{n}-", 90)
        log = dev.log_text()
        completed = re.findall(r"example: workflow example-order-\d-\d+ completed: (.*)", log)
        assert len(completed) == 2
        for result in completed:  # charge failed once and was retried
            assert "'charged': True" in result and "'attempt': 2" in result
        assert log.count("JOB COMPLETED") == 3, log[-3000:]
        assert log.count("WORKFLOW_EXECUTION_COMPLETED") == 2
        assert "ActivityTaskFailed" not in log  # a retried attempt writes no failure event
        # engine and example workers report on one port
        scrape = Scrape.of(port)
        assert scrape.value("streamproc_commands_processed_total", value_type="WORKFLOW", intent="START") == 2
        assert scrape.value("streamproc_schedule_to_start_latency_seconds_count", task_queue="hello",
                            task_type="job") == 3
        dev.proc.send_signal(signal.SIGINT)
        assert dev.proc.wait(60) == 0
    finally:
        dev.kill()
