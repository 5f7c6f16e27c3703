"""The metrics scrape on a real broker: an engine, a job worker and a workflow worker under a
little load, scraped over HTTP as Prometheus does; and the lag of a task queue consumer
from librdkafka's statistics."""

from __future__ import annotations

import socket
import threading
import time
from datetime import timedelta

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from streamproc.client import Client
from streamproc.devenv.example_workflow import OrderWorkflow, charge, reserve
from streamproc.kafka.config import consumer_config
from streamproc.kafka.engine import Engine
from streamproc.metrics import EngineMetrics, MetricsServer, WorkerMetrics
from streamproc.settings import Settings
from streamproc.worker import Worker
from streamproc.worker.job_worker import JobFailure, JobWorker
from tests.support.engines import combined_worker_process, engine_process, worker_process
from tests.support.metrics_scrape import Scrape, get
from tests.support.polling import wait_until

pytestmark = pytest.mark.kafka

ENGINE_FAMILIES = ["streamproc_commands_processed", "streamproc_commands_rejected", "streamproc_batch_size",
                   "streamproc_transaction_commit_latency_seconds", "streamproc_due_date_lag_seconds",
                   "streamproc_partitions_owned", "streamproc_rocksdb_size_bytes"]
WORKER_FAMILIES = ["streamproc_schedule_to_start_latency_seconds",
                   "streamproc_workflow_task_execution_latency_seconds", "streamproc_task_queue_consumer_lag"]


class RestoreHeldEngine(Engine):
    """Holds the restore of its partitions until the test lets it go."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.restoring = threading.Event()
        self.release = threading.Event()

    def _restore(self, db, pid: int) -> int:
        self.restoring.set()
        self.release.wait(30)
        return super()._restore(db, pid)


def _flaky_greeting(job) -> dict:
    if job.attempt == 1:  # a retry after a backoff: a due command, so a due-date lag
        raise JobFailure("first attempt fails", retry_backoff=timedelta(milliseconds=100))
    return {"hello": job.payload}


def test_every_metric_is_scraped_and_moves_under_load(bootstrap, namespace, tmp_path):
    settings = Settings(bootstrap=bootstrap, namespace=namespace, partitions=2, state_dir=tmp_path,
                        engine_id="metrics")
    engine = RestoreHeldEngine(settings, metrics=EngineMetrics(), idle_poll_ms=10)
    worker_metrics = WorkerMetrics(stats_interval_ms=200)
    engine_thread = threading.Thread(target=engine.run, daemon=True)
    jobs = JobWorker("greet", _flaky_greeting, bootstrap=bootstrap, namespace=namespace, worker_id="greeter",
                     metrics=worker_metrics)
    jobs_thread = threading.Thread(target=jobs.run, daemon=True)
    with MetricsServer(engine.metrics.registry, 0, host="127.0.0.1", live=engine.alive,
                       ready=engine.restored) as engine_http, \
            MetricsServer(worker_metrics.registry, 0, host="127.0.0.1", ready=jobs.ready.is_set) as worker_http:
        assert get(engine_http.port, "/healthz")[0] == 200
        assert get(engine_http.port, "/readyz")[0] == 503  # no partitions assigned yet
        assert get(worker_http.port, "/readyz")[0] == 503
        engine_thread.start()
        try:
            assert engine.restoring.wait(30)
            assert get(engine_http.port, "/readyz")[0] == 503  # assigned, restore under way
            engine.release.set()
            wait_until(lambda: get(engine_http.port, "/readyz")[0] == 200, 30, "ready once restored")
            before = Scrape.of(engine_http.port)
            assert before.value("streamproc_partitions_owned") == 2

            jobs_thread.start()
            with Client(bootstrap, namespace) as client, \
                    Worker(client, task_queue="orders", workflows=[OrderWorkflow], activities=[reserve, charge],
                           identity="metrics-worker", metrics=worker_metrics):
                wait_until(jobs.ready.is_set, 30, "the job worker got its partitions")
                assert get(worker_http.port, "/readyz")[0] == 200
                for n in range(10):
                    client.create_job("greet", n)
                client.complete_job((1 << 51) + 12345, 1, None)  # no such job: NOT_FOUND
                client.flush()
                order = client.start_workflow(OrderWorkflow.run, "o-1", id="metrics-order", task_queue="orders")
                assert order.result(timeout=30)["charged"] is True
                engine_scrape = wait_until(
                    lambda: (s := Scrape.of(engine_http.port)).value(
                        "streamproc_commands_processed_total", value_type="JOB", intent="COMPLETE") >= 11 and s,
                    30, "ten jobs completed (and the COMPLETE of no job refused)")
                worker_scrape = wait_until(
                    lambda: (s := Scrape.of(worker_http.port)).labels(
                        "streamproc_task_queue_consumer_lag", "task_type") >= {"job", "activity", "workflow"} and s,
                    10, "the lag of every task queue consumer reported")
        finally:
            engine.release.set()
            jobs.stop()
            engine.stop()
            engine_thread.join(30)
            jobs_thread.join(30)
        assert get(engine_http.port, "/healthz")[0] == 503  # the engine's loop has ended

    for family in ENGINE_FAMILIES:
        assert family in engine_scrape.families, family
    for family in WORKER_FAMILIES:
        assert family in worker_scrape.families, family
    after = engine_scrape
    processed = "streamproc_commands_processed_total"
    assert after.value(processed) > before.value(processed)
    assert after.value(processed, value_type="JOB", intent="CREATE") == 10
    assert after.value(processed, value_type="JOB", intent="RECUR_AFTER_BACKOFF") >= 10
    assert after.value(processed, value_type="WORKFLOW", intent="START") == 1
    assert after.labels(processed, "partition") == {"0", "1"}
    assert after.value("streamproc_commands_rejected_total", value_type="JOB", intent="COMPLETE",
                       rejection_type="NOT_FOUND", partition="1") == 1
    assert after.value("streamproc_batch_size_count") > before.value("streamproc_batch_size_count")
    assert after.value("streamproc_batch_size_sum") == after.value(processed)  # every command in one batch
    commits = after.value("streamproc_transaction_commit_latency_seconds_count")
    assert commits == after.value("streamproc_batch_size_count")
    lag = "streamproc_due_date_lag_seconds_count"
    assert after.value(lag, value_type="JOB", intent="RECUR_AFTER_BACKOFF") >= 10
    assert after.value(lag, value_type="WORKFLOW", intent="TIMER_FIRE") == 1  # the order's 2 s timer
    assert after.value(lag, value_type="ACTIVITY_TASK", intent="DISPATCH") == 1  # charge's retry
    assert after.value("streamproc_partitions_owned") == 2
    assert all(after.value("streamproc_rocksdb_size_bytes", partition=p) > 0 for p in ("0", "1"))

    s2s = "streamproc_schedule_to_start_latency_seconds_count"
    assert worker_scrape.value(s2s, task_queue="greet", task_type="job") >= 20  # two attempts per job
    assert worker_scrape.value(s2s, task_queue="orders", task_type="activity") == 3  # reserve, charge twice
    # A workflow task that rode along with an activity's completion was never scheduled apart
    # from its answer: it has no schedule-to-start, and counts as ridden along instead.
    rode_along = worker_scrape.value("streamproc_workflow_task_ride_along_total", task_queue="orders",
                                     verdict="accepted")
    assert worker_scrape.value(s2s, task_queue="orders", task_type="workflow") + rode_along >= 3
    assert worker_scrape.value("streamproc_workflow_task_execution_latency_seconds_count", task_queue="orders") >= 3
    assert all(v >= 0 for v in (s.value for s in worker_scrape.samples
                                if s.name == "streamproc_task_queue_consumer_lag"))


def test_consumer_lag_follows_the_committed_offset(bootstrap, namespace):
    """librdkafka's statistics, read on a real consumer: the lag is the end of the partition
    minus the group's committed offset, and moves with each commit."""
    topic = f"{namespace}.tasks.lag"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for n in range(10):
        producer.produce(topic, str(n).encode(), partition=0)
    assert producer.flush(30) == 0
    metrics = WorkerMetrics(stats_interval_ms=100)
    consumer = Consumer(consumer_config(bootstrap, f"{namespace}.lag-group",
                                        **metrics.consumer_config("lag", "job", topic)))
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])

        def lag_after_commit(offset: int) -> float:
            consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)

            def reported():
                consumer.poll(0.05)  # statistics arrive on the polling thread
                s = Scrape(_text(metrics))
                value = s.value("streamproc_task_queue_consumer_lag", task_queue="lag", partition="0")
                return s.labels("streamproc_task_queue_consumer_lag", "partition") == {"0"} and value == 10 - offset
            wait_until(reported, 20, f"lag {10 - offset} after committing {offset}")
            return 10 - offset

        assert lag_after_commit(3) == 7
        assert lag_after_commit(10) == 0
    finally:
        consumer.close()


def _text(metrics: EngineMetrics | WorkerMetrics) -> str:
    """What a scrape of `metrics` would read."""
    from prometheus_client import generate_latest

    return generate_latest(metrics.registry).decode()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(port: int, path: str) -> int | None:
    """The status of GET `path`, or None while nothing listens."""
    try:
        return get(port, path)[0]
    except OSError:
        return None


def test_the_cli_serves_metrics_on_its_port_and_refuses_a_port_in_use(bootstrap, namespace, tmp_path):
    engine_port, worker_port, workflow_port = _free_port(), _free_port(), _free_port()
    engine = engine_process(bootstrap, namespace, "cli-metrics", tmp_path / "state", tmp_path, partitions=2,
                            options=("--metrics-port", str(engine_port))).start()
    worker = worker_process(bootstrap, namespace, "greet", "cli-worker", tmp_path,
                            options=("--metrics-port", str(worker_port))).start()
    example = "streamproc.devenv.example_workflow"
    workflows = combined_worker_process(bootstrap, namespace, "orders", "cli-workflows", tmp_path,
                                        workflows=[f"{example}:OrderWorkflow"], activities=[f"{example}:reserve"],
                                        options=("--metrics-port", str(workflow_port))).start()
    try:
        for port, what in ((engine_port, "engine"), (worker_port, "job worker"), (workflow_port, "workflow worker")):
            wait_until(lambda port=port: _answers(port, "/readyz") == 200, 60, f"the {what} process ready")
            assert _answers(port, "/healthz") == 200
        assert Scrape.of(engine_port).value("streamproc_partitions_owned") == 2
        assert "streamproc_task_queue_consumer_lag" in Scrape.of(worker_port).families
        assert "streamproc_workflow_task_execution_latency_seconds" in Scrape.of(workflow_port).families

        second = engine_process(bootstrap, namespace, "cli-metrics-2", tmp_path / "state-2", tmp_path,
                                partitions=2, options=("--metrics-port", str(engine_port))).start()
        assert second.wait_exit(60) == 1
        output = second.log_text()
        assert f"metrics port {engine_port} on 0.0.0.0: in use" in output and "Traceback" not in output
    finally:
        for process in (workflows, worker, engine):
            process.stop()


def test_a_batch_rewound_after_a_failed_commit_is_counted_once(bootstrap, namespace, tmp_path):
    """The commit of the first batch fails while the next batch is processed over it: both
    are rewound and processed again, and each command is still counted once."""
    settings = Settings(bootstrap=bootstrap, namespace=namespace, partitions=1, state_dir=tmp_path,
                        engine_id="rewound")
    engine = Engine(settings, metrics=EngineMetrics(), idle_poll_ms=10)
    real_commit, failed = engine._txn.commit_transaction, threading.Event()

    def first_commit_fails(*args):
        if failed.is_set():
            return real_commit(*args)
        failed.set()
        time.sleep(0.5)  # meanwhile the loop processes the next batch over this one
        raise RuntimeError("the test refuses this commit")

    engine._txn.commit_transaction = first_commit_fails
    thread = threading.Thread(target=engine.run, daemon=True)
    thread.start()
    try:
        assert engine.ready.wait(60)
        with Client(bootstrap, namespace) as client:
            for n in range(40):
                client.create_job("counted", n)
                client.flush()
                time.sleep(0.02)
        scrape = lambda: Scrape(_text(engine.metrics))  # noqa: E731
        created = {"value_type": "JOB", "intent": "CREATE"}
        wait_until(lambda: scrape().value("streamproc_commands_processed_total", **created) >= 40, 30,
                   "forty CREATEs counted")
        time.sleep(0.5)  # a double count would show now
        assert failed.is_set()
        assert scrape().value("streamproc_commands_processed_total", **created) == 40
        assert engine.stats.commands >= 40
    finally:
        engine.stop()
        thread.join(30)
