"""Job push end to end on a real broker: an engine of 4 partitions in the test, push workers
(`JobWorker(push=True)`, `streamproc worker run --push`) registered on every partition.

Checked: every job completes exactly once and each (key, attempt) starts a handler at most
once; jobs are pushed (no START on the commands log for them) while the workers have
credit, and come through the task queue's topic when no stream has; a worker that stops
unregisters, so new jobs go to the other; a worker SIGKILLed with pushed jobs in hand
leaves them to time out and complete on the other.
"""

from __future__ import annotations

import collections
import threading
import time
from datetime import timedelta

import pytest
from confluent_kafka import Consumer, TopicPartition

from streamproc.client import Client
from streamproc.clock import ManualClock
from streamproc.protocol import codec
from streamproc.protocol.topics import Topics
from streamproc.worker.job_worker import JobWorker
from tests.support.engines import EngineThread, worker_process, with_process_logs
from tests.support.history import EventLog, assert_jobs_completed_once
from tests.support.polling import wait_until

pytestmark = pytest.mark.kafka

QUEUE = "parcels"
PARTITIONS = 4


class Runs:
    """Handler starts of the in-process workers: (key, attempt, worker)."""

    def __init__(self) -> None:
        self.started: list[tuple[int, int, str]] = []
        self._lock = threading.Lock()

    def handler(self, worker: str, hold: threading.Event | None = None):
        def run(job):
            with self._lock:
                self.started.append((job.key, job.attempt, worker))
            if hold is not None and job.payload.get("hold"):
                hold.wait(60)
            return {"n": job.payload["n"] * 2}
        return run

    def assert_each_attempt_started_once(self) -> None:
        with self._lock:
            counts = collections.Counter((key, attempt) for key, attempt, _ in self.started)
        assert counts and max(counts.values()) == 1, [a for a, n in counts.items() if n > 1][:5]


class PushWorkers:
    """In-process push workers, each in its own thread."""

    def __init__(self, bootstrap: str, namespace: str, runs: Runs) -> None:
        self.bootstrap, self.namespace, self.runs = bootstrap, namespace, runs
        self.workers: dict[str, JobWorker] = {}
        self.threads: dict[str, threading.Thread] = {}

    def start(self, name: str, hold: threading.Event | None = None, **options) -> JobWorker:
        worker = JobWorker(QUEUE, self.runs.handler(name, hold), bootstrap=self.bootstrap, namespace=self.namespace,
                           worker_id=name, push=True, **options)
        self.workers[name], self.threads[name] = worker, threading.Thread(target=worker.run, daemon=True)
        self.threads[name].start()
        return worker

    def wait_ready(self) -> None:
        """Every worker registered on every partition and in the queue's consumer group."""
        for name, worker in self.workers.items():
            assert worker.stream_registered.wait(60), f"{name}: stream not registered"
            assert worker.ready.wait(60), f"{name}: no task partitions"

    def stop(self, name: str) -> None:
        self.workers[name].stop()
        self.threads[name].join(30)
        assert not self.threads[name].is_alive(), f"{name} did not stop"

    def stop_all(self) -> None:
        for name, thread in self.threads.items():
            if thread.is_alive():
                self.stop(name)


def _create_paced(client: Client, count: int, per_second: float, first: int = 0, **options) -> None:
    """`count` jobs at about `per_second`, in bursts of 10."""
    for i in range(first, first + count):
        client.create_job(QUEUE, {"n": i}, request_id=f"job-{i}", **options)
        if i % 10 == 9:
            client.flush()
            time.sleep(10 / per_second)
    client.flush()


def _job_starts_on_the_commands_log(bootstrap: str, namespace: str) -> list[int]:
    """The keys of the job START commands on the commands topic, read to its end."""
    topic = Topics(namespace).commands
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{namespace}-starts",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        parts = [TopicPartition(topic, p, 0) for p in range(PARTITIONS)]
        ends = {p.partition: consumer.get_watermark_offsets(p, timeout=10)[1] for p in parts}
        consumer.assign(parts)
        keys, read_to = [], {p: 0 for p in ends}
        deadline = time.monotonic() + 60
        while any(read_to[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            for msg in consumer.consume(500, 0.2):
                if msg.error() is not None:
                    continue
                read_to[msg.partition()] = msg.offset() + 1
                record = codec.decode(msg.value(), msg.headers())
                if record.value_type == "JOB" and record.intent == "START":
                    keys.append(record.key)
        assert all(read_to[p] >= ends[p] for p in ends), f"commands not read to their end: {read_to} of {ends}"
        return keys
    finally:
        consumer.close()


def _engine(bootstrap, namespace, tmp_path, name="push-e2e") -> EngineThread:
    return EngineThread.on(bootstrap, namespace, tmp_path / "state", name, partitions=PARTITIONS)


def test_jobs_are_pushed_to_two_workers_and_each_completes_once(bootstrap, namespace, tmp_path):
    runs, count = Runs(), 500
    workers = PushWorkers(bootstrap, namespace, runs)
    events = EventLog(bootstrap, namespace)
    with _engine(bootstrap, namespace, tmp_path):
        try:
            w1, w2 = workers.start("w1"), workers.start("w2")
            workers.wait_ready()
            with Client(bootstrap, namespace) as client:
                _create_paced(client, count, per_second=100)
            events.read_while_progressing(lambda e: e.count("COMPLETED") >= count,
                                          lambda e: e.count("COMPLETED"), stalled_s=30)
            workers.stop_all()  # each unregisters on every partition
            events.read_until(lambda e: len(e.events("JOB_STREAM", "UNREGISTERED")) >= 2 * PARTITIONS, 30)
            time.sleep(1)  # anything duplicated would arrive now
            events.read_available()
        finally:
            workers.stop_all()
            events.close()
        starts = _job_starts_on_the_commands_log(bootstrap, namespace)

    assert_jobs_completed_once(events, count)
    runs.assert_each_attempt_started_once()
    assert {attempt for _, attempt, _ in runs.started} == {1}
    assert events.rejections() == [], [r.rejection_reason for r in events.rejections()[:5]]
    pushed, from_topic = w1.pushed + w2.pushed, w1.accepted_starts + w2.accepted_starts
    print(f"{count} jobs: {pushed} pushed ({w1.pushed} to w1, {w2.pushed} to w2), {from_topic} from the topic")
    assert pushed + from_topic == count
    assert pushed >= 0.9 * count, "most jobs are pushed while the workers keep up"
    assert w1.pushed > 0 and w2.pushed > 0
    # The engine processed a START only for the jobs taken from the topic: none for a pushed one.
    assert len(starts) == from_topic and len(set(starts)) == len(starts)
    started = collections.Counter(e.key for e in events.events(intent="STARTED"))
    assert len(started) == count and set(started.values()) == {1}
    assert {e.value["worker"] for e in events.events(intent="STARTED")} == {"w1", "w2"}
    registered = events.events("JOB_STREAM", "REGISTERED")
    assert {(e.partition_id, e.value["worker"]) for e in registered} == {
        (p, w) for p in range(PARTITIONS) for w in ("w1", "w2")}
    assert {e.value["credits"] for e in registered} == {256 // PARTITIONS}
    assert len(events.events("JOB_STREAM", "UNREGISTERED")) == 2 * PARTITIONS


def test_a_job_no_stream_has_credit_for_completes_through_the_topic(bootstrap, namespace, tmp_path):
    """One worker with 1 credit per partition: a held job takes its partition's credit, the
    next job created there goes to the task queue and the same worker takes it with START."""
    runs, hold = Runs(), threading.Event()
    workers = PushWorkers(bootstrap, namespace, runs)
    events = EventLog(bootstrap, namespace)
    with _engine(bootstrap, namespace, tmp_path):
        try:
            worker = workers.start("w1", hold, max_concurrent=2, max_jobs_active=PARTITIONS)
            workers.wait_ready()
            with Client(bootstrap, namespace) as client:
                client.create_job(QUEUE, {"n": 1, "hold": True}, routing_key="same", request_id="held")
                client.flush()
                wait_until(lambda: worker.pushed == 1, 30, "the first job pushed")
                client.create_job(QUEUE, {"n": 2}, routing_key="same", request_id="overflow")
                client.flush()
                events.read_until(lambda e: e.count("COMPLETED") == 1, timeout=30)
                (done,) = events.events(intent="COMPLETED")
                assert done.request_id != "held" and worker.accepted_starts == 1 and worker.pushed == 1
                hold.set()
                events.read_until(lambda e: e.count("COMPLETED") == 2, timeout=30)
        finally:
            hold.set()
            workers.stop_all()
            events.close()
        starts = _job_starts_on_the_commands_log(bootstrap, namespace)
    created = {e.request_id: e.key for e in events.events(intent="CREATED")}
    assert starts == [created["overflow"]]
    assert [key for key, _, _ in runs.started] == [created["held"], created["overflow"]]
    assert events.rejections() == []


def test_after_a_worker_stops_new_jobs_go_to_the_other(bootstrap, namespace, tmp_path):
    runs = Runs()
    workers = PushWorkers(bootstrap, namespace, runs)
    events = EventLog(bootstrap, namespace)
    with _engine(bootstrap, namespace, tmp_path):
        try:
            w1, w2 = workers.start("w1"), workers.start("w2")
            workers.wait_ready()
            with Client(bootstrap, namespace) as client:
                _create_paced(client, 40, per_second=100)
                events.read_until(lambda e: e.count("COMPLETED") >= 40, timeout=60)
                assert w1.pushed > 0 and w2.pushed > 0
                workers.stop("w1")                      # UNREGISTER on every partition, answered
                w1_pushed, w2_pushed, ran_before = w1.pushed, w2.pushed, len(runs.started)
                _create_paced(client, 60, per_second=100, first=40, timeout=timedelta(seconds=5))
                events.read_until(lambda e: e.count("COMPLETED") >= 100, timeout=60)
        finally:
            workers.stop_all()
            events.close()
    assert_jobs_completed_once(events, 100)
    runs.assert_each_attempt_started_once()
    assert {worker for _, _, worker in runs.started[ran_before:]} == {"w2"}
    assert w1.pushed == w1_pushed and w2.pushed - w2_pushed == 60
    unregistered = events.events("JOB_STREAM", "UNREGISTERED")
    assert sorted(e.partition_id for e in unregistered if e.value["worker"] == "w1") == list(range(PARTITIONS))
    assert events.count("TIMED_OUT") == 0 and events.rejections() == []


def test_a_stream_whose_lease_ended_registers_again_and_is_pushed_to(bootstrap, namespace, tmp_path):
    """The engine's clock jumps past the leases (an engine away longer than a lease looks the
    same to the worker): each partition expires the stream, the worker's next RENEW there is
    refused NOT_FOUND, it registers again, and jobs are pushed to it again. The engine's
    manual clock is years behind the wall clock: a pushed job's deadline is read against
    Kafka's time, so the handler runs."""
    clock, runs = ManualClock(), Runs()
    workers = PushWorkers(bootstrap, namespace, runs)
    events = EventLog(bootstrap, namespace)
    with EngineThread.on(bootstrap, namespace, tmp_path / "state", "push-lease", partitions=PARTITIONS,
                         clock=clock):
        try:
            worker = workers.start("w1")
            workers.wait_ready()
            # Just after a renewal, so that no RENEW lands between the jump and the expiries.
            events.read_until(lambda e: len(e.events("JOB_STREAM", "RENEWED")) >= PARTITIONS, 30)
            clock.advance(timedelta(seconds=16))
            events.read_until(lambda e: len(e.events("JOB_STREAM", "EXPIRED")) >= PARTITIONS, 30)
            events.read_until(lambda e: len(e.events("JOB_STREAM", "REGISTERED")) >= 2 * PARTITIONS, 30)
            with Client(bootstrap, namespace) as client:
                _create_paced(client, 8, per_second=100)
            events.read_until(lambda e: e.count("COMPLETED") >= 8, timeout=30)
        finally:
            workers.stop_all()
            events.close()
    assert_jobs_completed_once(events, 8)
    assert worker.pushed == 8 and worker.accepted_starts == 0
    refused = [r for r in events.rejections() if r.intent == "RENEW"]
    assert sorted(r.partition_id for r in refused) == list(range(PARTITIONS))
    assert {r.rejection_type for r in refused} == {"NOT_FOUND"}


def _runs_file(path) -> list[tuple[int, int, str]]:
    if not path.exists():
        return []
    return [(int(k), int(a), w) for k, a, w in (line.split() for line in path.read_text().splitlines())]


def test_jobs_pushed_to_a_sigkilled_worker_complete_on_the_other_after_their_timeout(bootstrap, namespace, tmp_path):
    runs_path, count, timeout_s = tmp_path / "runs.txt", 200, 2
    procs = [worker_process(bootstrap, namespace, QUEUE, name, tmp_path,
                            handler="tests.support.handlers:recorded_brief_double",
                            options=("--push", "--max-concurrent", "8"), STREAMPROC_TEST_RUNS=str(runs_path),
                            STREAMPROC_TEST_WORKER=name) for name in ("good", "bad")]
    good, bad = procs
    events = EventLog(bootstrap, namespace)
    with _engine(bootstrap, namespace, tmp_path), with_process_logs(procs):
        try:
            for p in procs:
                p.start()
            for p in procs:
                p.wait_for_log("job_stream_registered")
                p.wait_for_log("tasks_assigned")
            with Client(bootstrap, namespace) as client:
                _create_paced(client, 60, per_second=40, timeout=timedelta(seconds=timeout_s))
                wait_until(lambda: sum(w == "bad" for _, _, w in _runs_file(runs_path)) >= 10, 30,
                           "the bad worker ran 10 jobs")
                bad.kill()                              # pushed jobs in hand, its stream still leased
                killed_at = time.monotonic()
                _create_paced(client, count - 60, per_second=40, first=60, timeout=timedelta(seconds=timeout_s))
            events.read_while_progressing(lambda e: e.count("COMPLETED") >= count,
                                          lambda e: e.count("COMPLETED"), stalled_s=30)
            took = time.monotonic() - killed_at
            time.sleep(1)
            events.read_available()
        finally:
            events.close()
            for p in procs:
                p.stop()

    assert_jobs_completed_once(events, count)
    runs = _runs_file(runs_path)
    attempts = collections.Counter((key, attempt) for key, attempt, _ in runs)
    assert max(attempts.values()) == 1, f"handlers ran twice: {[a for a, n in attempts.items() if n > 1][:5]}"
    completed_by = {e.key: e.value["worker"] for e in events.events(intent="COMPLETED")}
    timed_out = {e.key for e in events.events(intent="TIMED_OUT")}
    assert timed_out, "the killed worker held pushed jobs"
    assert all(completed_by[key] == "good" for key in timed_out)
    # the killed worker's pushes were jobs the engine started for it: those it never finished
    # came back after their timeout, at a later attempt, on the healthy worker
    stranded = {e.key for e in events.events(intent="STARTED") if e.value["worker"] == "bad"} - {
        key for key, worker in completed_by.items() if worker == "bad"}
    assert stranded and stranded <= timed_out
    retried = [(k, a) for k, a, w in runs if k in stranded and w == "good"]
    assert {k for k, _ in retried} == stranded and min(a for _, a in retried) >= 2
    print(f"{count} jobs, {len(stranded)} stranded on the killed worker: all completed {took:.1f} s after the kill")
