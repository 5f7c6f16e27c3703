"""Workflow takeover: an engine's partitions move to another engine with the changelog alone.

Two engine processes share the partitions while the crash test's workflows (three
activities and a one-second timer) run on both. One engine is SIGKILLed and its state
directory deleted: the other takes its partitions over from the compacted changelog and
every workflow completes exactly once, with its result and a gapless well-formed history.
Then the survivor stops and a new engine with an empty state directory restores every
partition: closed runs are still there (describe, history, the id reuse decision), runs
caught mid-flight complete, and the key generator goes on where it was (a new run of an
old id gets a new key and leaves the old history alone). The changelog's segments roll
every second here, so the broker really compacts what the fresh engine restores from.
"""

from __future__ import annotations

import json
import shutil
import time

import orjson
import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from streamproc.client import Client, WorkflowAlreadyStartedError
from streamproc.kafka.config import consumer_config
from streamproc.protocol.partitioning import partition_for
from streamproc.protocol.topics import Topics
from streamproc.semantics.workflow_events import EventType
from streamproc.semantics.workflow_history import check_well_formed
from streamproc.semantics.workflow_ids import (
    WorkflowExecutionStatus,
    WorkflowIdReusePolicy,
)
from tests.support.crash_chaos import stop_workers_that_lived
from tests.support.crash_workflow_checks import (COMPLETED, Runs, Starter, check_completed_once,
                                                 check_the_events_topic, histories_from_the_client, open_activities,
                                                 runs_from_events)
from tests.support.crash_workflows import ThreeStepsAndATimer, expected_result
from tests.support.engines import Process, combined_worker_process, engine_process, with_process_logs
from tests.support.history import EventLog
from tests.support.polling import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

PARTITIONS = 4
COUNT = 200
LATE = 20  # started just before the survivor stops: the fresh engine finds them mid-flight
QUEUE = "takeover-flows"
WORKFLOW = "tests.support.crash_workflows:ThreeStepsAndATimer"
ACTIVITY = "tests.support.crash_workflows:crash_step"


def _compact_changelog_soon(bootstrap: str, namespace: str) -> None:
    """Roll the changelog's segments every second, so that the broker's cleaner compacts it
    while the test runs (the engine's one-minute segments would stay uncompacted)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
               for name, value in (("segment.ms", "1000"), ("min.cleanable.dirty.ratio", "0.01"))]
    resource = ConfigResource(ResourceType.TOPIC, Topics(namespace).changelog, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def _changelog_records(bootstrap: str, namespace: str) -> tuple[int, int]:
    """(records, distinct keys) of the whole changelog, read as a restore reads it."""
    topic = Topics(namespace).changelog
    consumer = Consumer(consumer_config(bootstrap, None, **{"group.id": f"{topic}.count",
                                                            "enable.partition.eof": True}))
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        records, keys, at_end = 0, set(), set()
        while len(at_end) < PARTITIONS:
            msg = consumer.poll(5)
            if msg is None:
                raise TimeoutError(f"changelog not read to its end: {records} records")
            if msg.error() is not None:
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                at_end.add(msg.partition())
                continue
            records += 1
            keys.add((msg.partition(), msg.key()))
        return records, len(keys)
    finally:
        consumer.close()


def _owned(process: Process) -> set[int]:
    """The partitions an engine process owns, as its last rebalance log line says."""
    owned: set[int] = set()
    for line in process.log_text().splitlines():
        if '"event": "partitions_assigned"' in line or '"event": "partitions_revoked"' in line:
            owned = set(json.loads(line)["owned"])
    return owned


def _restored(process: Process, since: int) -> dict[int, int]:
    """Partition → changelog records applied, for each partition_restored logged after `since`."""
    return {line["partition"]: line["records"] for line in map(json.loads, process.log_text()[since:].splitlines())
            if line.get("event") == "partition_restored"}


def _open_at(runs: Runs, partitions: set[int], at_ms: int, opened: str, closed: str) -> int:
    """How many `opened` events of runs in `partitions` had not reached their `closed` event at `at_ms`."""
    count = 0
    for history in runs.values():
        if partition_for(history[0].workflow_id, PARTITIONS) not in partitions:
            continue
        starts = [e.event_time_ms for e in history if e.event_type == opened]
        ends = [e.event_time_ms for e in history if e.event_type == closed]
        count += sum(1 for n, t in enumerate(starts) if t < at_ms and (n >= len(ends) or ends[n] > at_ms))
    return count


def _one_id_per_partition(ids: list[str]) -> list[str]:
    by_partition = {}
    for workflow_id in ids:
        by_partition.setdefault(partition_for(workflow_id, PARTITIONS), workflow_id)
    assert len(by_partition) == PARTITIONS
    return [by_partition[p] for p in sorted(by_partition)]


def _closed_runs_survive_restore(bootstrap: str, namespace: str, runs: Runs, ids: list[str]) -> dict[str, str]:
    """Describe, history and the id reuse decision of completed runs, on the fresh engine;
    then a new run of one old id per partition. Returns workflow id → the new run id."""
    run_of = {h[0].workflow_id: run_id for run_id, h in runs.items()}
    with Client(bootstrap, namespace) as client:
        for workflow_id in ids:
            described = client.get_workflow_handle(workflow_id).describe()
            assert (described.status, described.run_id) == (WorkflowExecutionStatus.COMPLETED, run_of[workflow_id])
            assert described.history_length == len(runs[run_of[workflow_id]])
        reused = _one_id_per_partition(ids)
        for workflow_id in reused:
            with pytest.raises(WorkflowAlreadyStartedError) as refused:
                client.start_workflow(ThreeStepsAndATimer.run, workflow_id, id=workflow_id, task_queue=QUEUE,
                                      id_reuse_policy=WorkflowIdReusePolicy.REJECT_DUPLICATE)
            assert str(refused.value) == (
                f"Workflow execution already finished. WorkflowId: {workflow_id}, RunId: {run_of[workflow_id]}. "
                "Workflow Id reuse policy: reject duplicate workflow Id.")
        # The default policy starts a new run: its key comes from the restored key generator.
        handles = {workflow_id: client.start_workflow(ThreeStepsAndATimer.run, workflow_id, id=workflow_id,
                                                      task_queue=QUEUE) for workflow_id in reused}
        for workflow_id, handle in handles.items():
            assert handle.run_id != run_of[workflow_id]
            assert handle.result(timeout=60) == expected_result(workflow_id)
        client.close_workflow_requests()
    return {workflow_id: handle.run_id for workflow_id, handle in handles.items()}


def test_workflows_survive_an_engine_killed_without_its_disk_and_a_restore_of_every_partition(
        bootstrap, namespace, tmp_path):
    a = engine_process(bootstrap, namespace, "wf-takeover-a", tmp_path / "a", tmp_path, PARTITIONS)
    b = engine_process(bootstrap, namespace, "wf-takeover-b", tmp_path / "b", tmp_path, PARTITIONS)
    c = engine_process(bootstrap, namespace, "wf-takeover-c", tmp_path / "c", tmp_path, PARTITIONS)
    workers = [combined_worker_process(bootstrap, namespace, QUEUE, f"tw{n}", tmp_path, workflows=[WORKFLOW],
                                       activities=[ACTIVITY]) for n in (1, 2)]
    events = EventLog(bootstrap, namespace)
    ids = [f"take-{n:03d}" for n in range(COUNT)]
    late_ids = [f"late-{n:02d}" for n in range(LATE)]
    starter = None
    began = time.monotonic()
    try:
        a.start().wait_for_log("partitions_assigned")
        _compact_changelog_soon(bootstrap, namespace)
        b.start()
        wait_until(lambda: _owned(a) and _owned(b) and _owned(a) | _owned(b) == set(range(PARTITIONS)),
                   60, "the two engines did not share the partitions")
        for w in workers:
            w.start()
        for w in workers:
            w.wait_for_log("workflow_tasks_assigned")
        starter = Starter(bootstrap, namespace, QUEUE)
        starter.start(ids)
        # Kill A while its partitions hold runs at every stage: some timers started, few runs done.
        events.read_until(lambda e: e.count_value("WORKFLOW", "TIMER_STARTED") >= COUNT // 5, timeout=120)
        a_partitions = _owned(a)
        a.kill()
        killed_ms = int(time.time() * 1000)
        shutil.rmtree(tmp_path / "a")  # its disk is gone with it
        mark = len(b.log_text())
        starter.close()
        assert starter.started() == COUNT
        with with_process_logs([b, *workers]):
            events.read_until(lambda e: e.count_value("WORKFLOW", COMPLETED) >= COUNT, timeout=180)
        took_over = _restored(b, mark)
        assert set(took_over) == a_partitions and all(took_over.values()), took_over
        takeover_s = time.monotonic() - began

        # The survivor stops with runs in flight; a fresh engine restores every partition.
        late = Starter(bootstrap, namespace, QUEUE)
        late.start(late_ids)
        late.close()
        events.read_until(lambda e: sum(r.value["workflow_id"] in late_ids for r in e.events("WORKFLOW", "TIMER_STARTED"))
                          >= LATE // 2, timeout=60)
        b.stop()
        stopped_ms = int(time.time() * 1000)
        # What the fresh engine reads is compacted: uncompacted, this changelog holds about
        # 1.6 records per key (run documents and activities change in every transaction).
        changelog = []

        def compacted() -> bool:
            changelog.append(_changelog_records(bootstrap, namespace))
            return changelog[-1][0] < 1.3 * changelog[-1][1]
        wait_until(compacted, 30, lambda: f"the changelog was not compacted: (records, keys) {changelog}")
        c.start()
        wait_until(lambda: _owned(c) == set(range(PARTITIONS)), 60, "the fresh engine did not get every partition")
        restored = _restored(c, 0)
        assert set(restored) == set(range(PARTITIONS)) and all(restored.values()), restored
        with with_process_logs([c, *workers]):
            events.read_until(lambda e: e.count_value("WORKFLOW", COMPLETED) >= COUNT + LATE, timeout=120)
        runs = runs_from_events(events)
        new_runs = _closed_runs_survive_restore(bootstrap, namespace, runs, ids + late_ids)
        sample = histories_from_the_client(bootstrap, namespace, [*ids[::10], *late_ids[::5]])

        stop_workers_that_lived(workers)
        c.stop()
        runs = check_the_events_topic(events, sample)  # the sample was fetched on the fresh engine
        assert open_activities(tmp_path / "c") == []
        # Keys come from each partition's key generator, restored with its state: never one twice.
        run_keys = {r.value["run_id"]: r.key for r in events.events("WORKFLOW")}
        assert len(set(run_keys.values())) == len(run_keys) == COUNT + LATE + PARTITIONS
        for workflow_id, run_id in new_runs.items():  # the new runs of old ids: their own histories
            history = runs.pop(run_id)
            assert check_well_formed([(e.event_id, EventType[e.event_type], e.attributes) for e in history]) == []
            assert orjson.loads(history[-1].attributes["result"]) == expected_result(workflow_id)
        check_completed_once(runs, ids + late_ids)
        # The kill and the stop caught runs mid-flight on the partitions that moved.
        in_flight = _open_at(runs, a_partitions, killed_ms, "WORKFLOW_EXECUTION_STARTED", COMPLETED)
        timers = _open_at(runs, a_partitions, killed_ms, "TIMER_STARTED", "TIMER_FIRED")
        late_in_flight = _open_at({r: h for r, h in runs.items() if h[0].workflow_id in late_ids},
                                  set(range(PARTITIONS)), stopped_ms, "WORKFLOW_EXECUTION_STARTED", COMPLETED)
        assert in_flight >= 10 and timers >= 1 and late_in_flight >= 1, (in_flight, timers, late_in_flight)
        print(f"\n{COUNT} workflows on 2 engines, engine A (partitions {sorted(a_partitions)}) killed with "
              f"{in_flight} runs in flight ({timers} timers pending); all done {takeover_s:.1f} s after the start "
              f"(changelog records applied on takeover: {took_over}); fresh engine restored {restored} and "
              f"finished {late_in_flight} runs caught by the stop; changelog (records, keys): {changelog[-1]}")
    finally:
        events.close()
        if starter is not None:
            starter.abandon()
        for p in (*workers, a, b, c):
            p.stop()
