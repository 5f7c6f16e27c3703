"""Command batches (protocol/command_batches.py): a burst of schedule actions travels as one
TRIGGER record per partition and one START record per workflow partition, and every
action still starts its workflow exactly once, across partitions, through replays."""

from __future__ import annotations

import orjson
import pytest

from streamproc.clock import ManualClock
from streamproc.due.checker import partition_checker
from streamproc.engine.partition import PartitionProcessor
from streamproc.protocol import codec
from streamproc.protocol.command_batches import (
    BATCH,
    MAX_BATCH_BYTES,
    MAX_BATCH_PARTS,
    MAX_PART_BYTES,
    BatchError,
    is_batch,
    pack,
    unpack,
)
from streamproc.protocol.partitioning import partition_for, routing_key_of
from streamproc.protocol.records import Record
from streamproc.state.db import PartitionDb

PARTITIONS = 4
DUE_MS = 1_800_000_000_000


def start(workflow_id: str, **value) -> Record:
    return Record.command("WORKFLOW", "START", {"workflow_id": workflow_id, "workflow_type": "Tick",
                                                "task_queue": "ticks", **value}, request_id=f"r-{workflow_id}")


def signal(workflow_id: str) -> Record:
    return Record.command("WORKFLOW", "SIGNAL", {"workflow_id": workflow_id, "signal_name": "s"})


def test_starts_for_one_partition_in_a_row_travel_as_one_batch_and_order_per_partition_is_kept():
    records = [(0, start("a")), (1, start("b")), (0, start("c")), (0, signal("c")), (0, start("d")), (1, start("e"))]
    packed = pack(records)
    assert [(p, r.intent, [x.value["workflow_id"] for x in unpack(r)] if is_batch(r) else r.value["workflow_id"])
            for p, r in packed] == [(0, BATCH, ["a", "c"]), (1, BATCH, ["b", "e"]), (0, "SIGNAL", "c"),
                                    (0, BATCH, ["d"])]


def test_a_batch_holds_at_most_its_number_of_commands_and_a_larger_one_is_refused():
    packed = pack([(0, Record.command("SCHEDULE", "TRIGGER", {"schedule_id": f"s{n}", "due_ms": 1}))
                   for n in range(MAX_BATCH_PARTS + 1)])
    assert [len(unpack(r)) for _, r in packed] == [MAX_BATCH_PARTS, 1]
    parts = [{"value": {"schedule_id": f"s{n}"}} for n in range(MAX_BATCH_PARTS + 1)]
    too_many = Record.command("SCHEDULE", BATCH, {"schedule_id": "s0", "attributes": orjson.dumps(
        {"intent": "TRIGGER", "parts": parts}).decode()})
    with pytest.raises(BatchError, match=f"at most {MAX_BATCH_PARTS} commands"):
        unpack(too_many)
    empty = Record.command("SCHEDULE", BATCH, {"schedule_id": "s0", "attributes": '{"intent": "TRIGGER", "parts": []}'})
    with pytest.raises(BatchError, match="holds no commands"):
        unpack(empty)


def test_a_batch_read_back_from_the_log_holds_the_commands_as_written():
    (_, batch), = pack([(0, start("a", input='["x"]')), (0, start("b"))])
    decoded = codec.decode(codec.encode(batch))
    assert decoded.intent == BATCH and decoded.value["workflow_id"] == "a"  # routed as its first part
    assert [(r.intent, r.value, r.request_id) for r in unpack(decoded)] == [
        ("START", start("a", input='["x"]').value, "r-a"), ("START", start("b").value, "r-b")]


def test_batches_stay_under_their_size_and_a_part_too_large_travels_alone():
    big = "x" * 60_000  # four fit in a batch, not five
    assert 4 * 60_000 < MAX_BATCH_BYTES < 5 * 60_000 and 60_000 < MAX_PART_BYTES
    packed = pack([(0, start(f"w{i}", input=orjson.dumps(big).decode())) for i in range(6)])
    assert [len(unpack(r)) for _, r in packed] == [4, 2]
    huge = start("huge", input=orjson.dumps("y" * MAX_PART_BYTES).decode())
    assert [r.intent for _, r in pack([(0, start("a")), (0, huge), (0, start("b"))])] == [BATCH, "START", BATCH]


class Partitions:
    """PARTITIONS processors with a manual clock; `commit` routes and packs what they wrote,
    as the engine's batch writer does, and returns it encoded, as the log holds it."""

    def __init__(self, root) -> None:
        self.clock = ManualClock(start_ms=DUE_MS - 60_000)
        self.dbs = [PartitionDb(root / f"p{p}", p) for p in range(PARTITIONS)]
        self.procs = [PartitionProcessor(p, db, self.clock) for p, db in enumerate(self.dbs)]
        self.checkers = [partition_checker(db) for db in self.dbs]
        for proc, checker in zip(self.procs, self.checkers):
            proc.on_processed = checker.processed
        self.events: list[Record] = []

    def send(self, pid: int, data: bytes) -> None:
        self.procs[pid].process(data, None, 0)

    def commit(self, pid: int) -> list[tuple[int, bytes]]:
        proc = self.procs[pid]
        self.events += [codec.decode(codec.encode(r)) for r in proc.output.events]
        routed = [(partition_for(routing_key_of(c.value_type, c.value), PARTITIONS), c)
                  for c in proc.output.commands]
        self.dbs[pid].apply(proc.writes.batch, {"changelog_offset": 0})
        proc.reset_batch()
        self.checkers[pid].refresh()
        return [(target, codec.encode(c)) for target, c in pack(routed)]

    def abort(self, pid: int) -> None:
        self.procs[pid].reset_batch()

    def intents(self, intent: str) -> list[Record]:
        return [e for e in self.events if e.intent == intent]

    def close(self) -> None:
        for db in self.dbs:
            db.close()


@pytest.fixture
def parts(tmp_path):
    p = Partitions(tmp_path)
    yield p
    p.close()


def _create(parts: Partitions, count: int) -> list[str]:
    ids = [f"s{n}" for n in range(count)]
    for schedule_id in ids:
        definition = {"action": {"start_workflow": {"workflow_id": schedule_id, "workflow_type": "Tick",
                                                    "task_queue": "ticks"}},
                      "spec": {"interval": [{"interval_ms": 1000}], "start_time_ms": DUE_MS, "end_time_ms": DUE_MS},
                      "policy": {"overlap": "ALLOW_ALL"}}
        pid = partition_for(schedule_id, PARTITIONS)
        parts.send(pid, codec.encode(Record.command("SCHEDULE", "CREATE", {
            "schedule_id": schedule_id, "schedule": orjson.dumps(definition).decode()})))
        parts.commit(pid)
    return ids


def _triggers(parts: Partitions) -> list[tuple[int, bytes]]:
    """Each partition's checker pass, processed as the engine does; the STARTs written."""
    out = []
    for pid, checker in enumerate(parts.checkers):
        due = checker.collect(parts.clock.now_ms())
        assert len(due) <= 1  # one TRIGGER record for all the partition's schedules due
        for cmd in due:
            cmd.encoded = codec.encode(cmd)
            parts.procs[pid].process_command(cmd, -1)
        written = parts.commit(pid)
        assert len({target for target, _ in written}) == len(written)  # one START record per partition
        out += written
    return out


def test_schedules_due_at_once_start_each_workflow_once_across_partitions_through_replays(parts):
    ids = _create(parts, 60)
    parts.clock.set(DUE_MS)
    starts = _triggers(parts)
    assert all(codec.decode(data).intent == BATCH for _, data in starts)
    assert len(parts.intents("ACTION_STARTED")) == 60
    for target, data in starts:
        parts.send(target, data)
        parts.abort(target)  # the transaction failed: the batch is read and processed again
        parts.send(target, data)
        parts.commit(target)
        parts.send(target, data)  # and once more, as if written twice: each part finds its run
        parts.commit(target)
    started = sorted(e.value["workflow_id"] for e in parts.intents("WORKFLOW_EXECUTION_STARTED"))
    assert started == sorted(f"{s}-2027-01-15T08:00:00Z" for s in ids)


def test_a_trigger_batch_processed_twice_takes_each_action_once(parts):
    _create(parts, 20)
    parts.clock.set(DUE_MS)
    pid = partition_for("s0", PARTITIONS)
    (batch,) = parts.checkers[pid].collect(parts.clock.now_ms())
    data = codec.encode(batch)
    parts.send(pid, data)
    parts.abort(pid)  # a crash before the commit: the checker's batch is written again
    parts.send(pid, data)
    parts.commit(pid)
    parts.send(pid, data)  # read again after it committed: every part is stale now
    parts.commit(pid)
    count = len(unpack(codec.decode(data)))
    assert len(parts.intents("ACTION_STARTED")) == count
    assert [e.rejection_type for e in parts.events if e.intent == "TRIGGER"] == ["INVALID_STATE"] * count


def test_a_part_that_is_refused_leaves_the_others_and_a_batch_that_cannot_be_read_is_refused(parts):
    (_, batch), = pack([(0, start("good-1")), (0, start("bad", workflow_type="")), (0, start("good-2"))])
    parts.send(0, codec.encode(batch))
    parts.commit(0)
    assert sorted(e.value["workflow_id"] for e in parts.intents("WORKFLOW_EXECUTION_STARTED")) == ["good-1", "good-2"]
    assert [(e.intent, e.rejection_type) for e in parts.events if e.rejection_type] == [("START", "INVALID_ARGUMENT")]
    parts.events.clear()
    broken = Record.command("WORKFLOW", BATCH, {"workflow_id": "x", "attributes": '{"intent": "BATCH", "parts": []}'})
    parts.send(0, codec.encode(broken))
    parts.commit(0)
    assert [(e.intent, e.rejection_type) for e in parts.events] == [(BATCH, "INVALID_ARGUMENT")]
    assert "must name the intent of its parts" in parts.events[0].rejection_reason


def test_workflows_answering_one_schedule_partition_send_one_batch_and_each_answer_is_heard(parts):
    closed = [Record.command("SCHEDULE", "WORKFLOW_CLOSED", {"schedule_id": f"gone-{n}", "workflow_id": f"w{n}",
                                                            "attributes": '{"status": "COMPLETED"}'})
              for n in range(3)]
    (_, batch), = pack([(0, c) for c in closed])
    assert batch.intent == BATCH and batch.value_type == "SCHEDULE"
    parts.send(0, codec.encode(batch))
    parts.commit(0)
    assert [(e.intent, e.rejection_type, e.value["schedule_id"]) for e in parts.events] == [
        ("WORKFLOW_CLOSED", "NOT_FOUND", f"gone-{n}") for n in range(3)]
