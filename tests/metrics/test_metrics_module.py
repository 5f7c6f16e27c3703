"""The metrics module without a broker or processors: tallies, families, lag, the HTTP server."""

from __future__ import annotations

import socket

import orjson
import pytest

from streamproc.metrics import EngineMetrics, MetricsPortError, MetricsServer, WorkerMetrics
from streamproc.metrics.batch_tally import BatchTally
from streamproc.metrics.consumer_lag import partition_lags
from streamproc.protocol.records import Record, RecordType
from tests.support.metrics_scrape import Scrape, get


def _command(value_type: str, intent: str) -> Record:
    return Record.command(value_type, intent, {}, key=1)


def _rejection(value_type: str, intent: str, rejection_type: str) -> Record:
    return Record(RecordType.COMMAND_REJECTION, value_type, intent, {}, key=1, rejection_type=rejection_type,
                  rejection_reason="why")


def _scrape(metrics) -> Scrape:
    from prometheus_client import generate_latest

    return Scrape(generate_latest(metrics.registry).decode())


def test_a_tally_counts_commands_rejections_and_due_lags_per_batch():
    tally = BatchTally()
    for _ in range(3):
        tally.command(0, _command("JOB", "CREATE"))
    tally.command(1, None)  # undecodable
    tally.due(1, _command("JOB", "TIME_OUT"), 12)
    tally.due(1, _command("WORKFLOW", "TIMER_FIRE"), None)  # not one of the checker's: counted, no lag
    tally.rejections_in(0, [_rejection("JOB", "COMPLETE", "INVALID_STATE"), _command("JOB", "CREATED"),
                            _rejection("JOB", "COMPLETE", "INVALID_STATE")])
    assert tally.commands == {(0, "JOB", "CREATE"): 3, (1, "UNKNOWN", "UNKNOWN"): 1, (1, "JOB", "TIME_OUT"): 1,
                              (1, "WORKFLOW", "TIMER_FIRE"): 1}
    assert tally.rejections == {(0, "JOB", "COMPLETE", "INVALID_STATE"): 2}
    assert tally.due_lags_ms == {("JOB", "TIME_OUT"): [12]}
    assert tally.size == 6


def test_a_batch_of_commands_counts_as_the_commands_it_holds():
    from streamproc.protocol.command_batches import pack

    (_, batch), = pack([(0, Record.command("WORKFLOW", "START", {"workflow_id": f"w{n}"})) for n in range(3)])
    tally = BatchTally()
    tally.command(2, batch)
    assert tally.commands == {(2, "WORKFLOW", "START"): 3}


def test_relayed_commands_count_on_the_partitions_that_processed_them():
    tally = BatchTally()
    tally.relayed([(1, Record.command("WORKFLOW", "START", {"workflow_id": "a"})),
                   (3, Record.command("SCHEDULE", "WORKFLOW_CLOSED", {"schedule_id": "s"}))])
    assert tally.commands == {(1, "WORKFLOW", "START"): 1, (3, "SCHEDULE", "WORKFLOW_CLOSED"): 1}
    assert tally.size == 2


def test_committed_batches_add_up_in_the_engine_families(tmp_path):
    metrics = EngineMetrics()
    for lag_ms in (3, 700):
        tally = BatchTally()
        tally.command(2, _command("JOB", "CREATE"))
        tally.due(2, _command("JOB", "TIME_OUT"), lag_ms)
        tally.rejections_in(2, [_rejection("JOB", "TIME_OUT", "INVALID_STATE")])
        metrics.committed(tally, 0.004)
    metrics.committed(BatchTally(), 0.5)  # only echo offsets committed: no batch
    s = _scrape(metrics)
    assert s.value("streamproc_commands_processed_total", partition="2", value_type="JOB", intent="CREATE") == 2
    assert s.value("streamproc_commands_processed_total") == 4
    assert s.value("streamproc_commands_rejected_total", rejection_type="INVALID_STATE", intent="TIME_OUT") == 2
    assert s.value("streamproc_batch_size_count") == 2 and s.value("streamproc_batch_size_sum") == 4
    assert s.value("streamproc_transaction_commit_latency_seconds_count") == 2
    assert s.value("streamproc_transaction_commit_latency_seconds_bucket", le="0.005") == 2
    lag = {"value_type": "JOB", "intent": "TIME_OUT"}
    assert s.value("streamproc_due_date_lag_seconds_count", **lag) == 2
    assert s.value("streamproc_due_date_lag_seconds_bucket", le="0.005", **lag) == 1
    assert s.value("streamproc_due_date_lag_seconds_bucket", le="1.0", **lag) == 2


def test_partitions_owned_and_rocksdb_size_are_read_when_scraped(tmp_path):
    metrics = EngineMetrics()
    s = _scrape(metrics)
    assert "streamproc_partitions_owned" in s.families and s.value("streamproc_partitions_owned") == 0
    owned = {}
    metrics.watch(lambda: dict(owned))
    for pid, size in ((0, 1000), (3, 250)):
        (tmp_path / f"p{pid}").mkdir()
        (tmp_path / f"p{pid}" / "000001.sst").write_bytes(b"x" * size)
        (tmp_path / f"p{pid}" / "LOG").write_bytes(b"y" * 10)
        owned[pid] = tmp_path / f"p{pid}"
    owned[5] = tmp_path / "gone"  # closed and deleted between the engine's answer and the walk
    s = _scrape(metrics)
    assert s.value("streamproc_partitions_owned") == 3
    assert s.value("streamproc_rocksdb_size_bytes", partition="0") == 1010
    assert s.value("streamproc_rocksdb_size_bytes", partition="3") == 260
    assert s.value("streamproc_rocksdb_size_bytes", partition="5") == 0


def test_each_metrics_object_has_its_own_registry():
    """Two engines in one process (tests, dev mode) must not collide or share counts."""
    a, b = EngineMetrics(), EngineMetrics()
    tally = BatchTally()
    tally.command(0, _command("JOB", "CREATE"))
    a.committed(tally, 0.001)
    assert _scrape(a).value("streamproc_commands_processed_total") == 1
    assert _scrape(b).value("streamproc_commands_processed_total") == 0
    WorkerMetrics(a.registry)  # engine and workers of one process share one registry
    with pytest.raises(ValueError):  # the same family twice in one registry is refused
        EngineMetrics(a.registry)


def _stats(topic: str, partitions: dict[str, int]) -> str:
    """librdkafka's statistics, reduced to what is read (the real ones carry much more)."""
    return orjson.dumps({"name": "c#consumer-1", "type": "consumer", "topics": {
        topic: {"topic": topic, "partitions": {
            pid: {"partition": int(pid), "fetch_state": "active", "consumer_lag": lag, "ls_offset": 10}
            for pid, lag in partitions.items()}}}}).decode()


def test_partition_lags_keep_owned_partitions_with_a_known_lag():
    stats = _stats("ns.tasks.q", {"0": 4, "1": -1, "2": 0, "-1": -1})
    assert partition_lags(stats, "ns.tasks.q") == {0: 4, 2: 0}
    assert partition_lags(stats, "ns.tasks.other") == {}
    assert partition_lags('{"topics": {}}', "ns.tasks.q") == {}


def test_worker_lag_follows_the_partitions_the_stats_name():
    metrics = WorkerMetrics()
    on_stats = metrics.consumer_config("q", "job", "ns.tasks.q")["stats_cb"]
    on_stats(_stats("ns.tasks.q", {"0": 4, "1": 2}))
    s = _scrape(metrics)
    assert s.value("streamproc_task_queue_consumer_lag", task_queue="q", task_type="job", partition="0") == 4
    assert s.labels("streamproc_task_queue_consumer_lag", "partition") == {"0", "1"}
    on_stats(_stats("ns.tasks.q", {"1": 7}))  # partition 0 revoked: another worker reports it now
    s = _scrape(metrics)
    assert s.labels("streamproc_task_queue_consumer_lag", "partition") == {"1"}
    assert s.value("streamproc_task_queue_consumer_lag", partition="1") == 7
    on_stats("not json")  # logged, ignored: the poll goes on
    assert _scrape(metrics).value("streamproc_task_queue_consumer_lag", partition="1") == 7


def test_worker_latencies_by_task_queue_and_type():
    metrics = WorkerMetrics()
    metrics.task_started("orders", "activity", 1_000, 1_040)
    metrics.task_started("orders", "workflow", 1_000, 3_000)
    metrics.task_started("orders", "job", 0, 5_000)  # no scheduled time on the record: not observed
    metrics.workflow_task_executed("orders", 0.002)
    s = _scrape(metrics)
    name = "streamproc_schedule_to_start_latency_seconds"
    assert s.value(f"{name}_sum", task_queue="orders", task_type="activity") == pytest.approx(0.04)
    assert s.value(f"{name}_sum", task_type="workflow") == pytest.approx(2.0)
    assert s.value(f"{name}_count", task_type="job") == 0
    assert s.value("streamproc_workflow_task_execution_latency_seconds_count", task_queue="orders") == 1


def test_the_server_answers_metrics_health_and_readiness():
    metrics = WorkerMetrics()
    metrics.workflow_task_executed("q", 0.01)
    state = {"live": True, "ready": False}
    with MetricsServer(metrics.registry, 0, host="127.0.0.1", live=lambda: state["live"],
                       ready=lambda: state["ready"]) as server:
        status, body = get(server.port, "/metrics")
        assert status == 200 and "streamproc_workflow_task_execution_latency_seconds_count" in body
        assert get(server.port, "/healthz") == (200, "ok\n")
        assert get(server.port, "/readyz")[0] == 503
        state.update(ready=True, live=False)
        assert get(server.port, "/readyz") == (200, "ok\n")
        assert get(server.port, "/healthz")[0] == 503
        assert get(server.port, "/nothing")[0] == 404
    with pytest.raises(OSError):  # stopped: nothing listens any more
        socket.create_connection(("127.0.0.1", server.port), timeout=1)


def test_a_check_that_raises_is_a_no():
    def broken() -> bool:
        raise RuntimeError("engine gone")
    with MetricsServer(WorkerMetrics().registry, 0, host="127.0.0.1", ready=broken) as server:
        assert get(server.port, "/readyz")[0] == 503


def test_a_port_in_use_is_one_clear_error():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(MetricsPortError) as raised:
            MetricsServer(WorkerMetrics().registry, port, host="127.0.0.1")
    assert raised.value.strerror == (f"metrics port {port} on 127.0.0.1: in use; "
                                     f"choose another with --metrics-port (0 = no metrics)")
