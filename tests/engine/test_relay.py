"""The relay (engine/relay.py): a command one partition writes for another partition of the
same engine is processed in the same batch, is still written (marked as relayed), is started
once through an aborted and replayed batch, and waits for the log while the engine has
commands of its own for that partition on it."""

from __future__ import annotations

from types import SimpleNamespace

import orjson
import pytest

from streamproc.due.checker import partition_checker
from streamproc.engine.processing import Limits
from streamproc.engine.relay import Relay, as_read
from streamproc.engine.schedules.actions import scheduled_workflow_id
from streamproc.kafka.due_commands import collect_due, process_due
from streamproc.protocol import codec, command_batches
from streamproc.protocol.partitioning import partition_for
from streamproc.protocol.records import Record
from streamproc.state.db import PartitionDb, PendingWrites
from streamproc.state.workflows import Workflows
from tests.engine.test_command_batches import PARTITIONS, DUE_MS, Partitions



class Engine(Partitions):
    """The PARTITIONS processors as one engine's; a batch is: the checkers' due commands
    processed, then relayed, then committed (or aborted) together."""

    def __init__(self, root) -> None:
        super().__init__(root)
        self.relay = Relay(PARTITIONS)
        #: Per committed batch, the events of all partitions (decoded as a reader sees them).
        self.batches: list[list[Record]] = []
        #: Commands written, with the partition they go to (relayed ones marked).
        self.written: list[tuple[int, Record]] = []

    def _reopen_checkers(self) -> None:
        self.checkers = [partition_checker(db) for db in self.dbs]
        for proc, checker in zip(self.procs, self.checkers):
            proc.on_processed = checker.processed

    def send_command(self, pid: int, record: Record) -> None:
        self.send(pid, codec.encode(record))

    def due(self, owned=range(PARTITIONS), budget: int = 1 << 30) -> list[tuple[int, Record]]:
        """One batch: every due command processed on its partition, then the relay over the
        `owned` partitions; returns what was relayed."""
        touched = set()
        for pid, checker in enumerate(self.checkers):
            for cmd in checker.collect(self.clock.now_ms()):
                cmd.encoded = codec.encode(cmd)
                self.procs[pid].process_command(cmd, -1)
                touched.add(pid)
        return self.relay.run({pid: self.procs[pid] for pid in owned}, touched, budget)

    def commit_all(self) -> list[Record]:
        events = []
        for pid, (proc, db) in enumerate(zip(self.procs, self.dbs)):
            events += [codec.decode(codec.encode(r)) for r in proc.output.events]
            self.written += [(self.relay.target_of(pid, c), c) for c in proc.output.commands]
            db.apply(proc.writes.batch, {"changelog_offset": 0})
            proc.reset_batch()
            self.checkers[pid].refresh()
        self.batches.append(events)
        return events

    def abort_all(self) -> None:
        """The transaction aborted: the batch is forgotten, the partitions reopen from their state."""
        for proc in self.procs:
            proc.reset_batch()
        self._reopen_checkers()

    def runs_of(self, workflow_id: str) -> int:
        pid = partition_for(workflow_id, PARTITIONS)
        return 1 if Workflows(PendingWrites(self.dbs[pid])).current_key(workflow_id) is not None else 0



@pytest.fixture
def engine(tmp_path):
    e = Engine(tmp_path)
    yield e
    e.close()


def _schedule_elsewhere(prefix: str) -> tuple[str, str]:
    """A schedule id whose action's workflow lives on another partition, and that workflow's id."""
    for n in range(100):
        schedule_id = f"{prefix}-{n}"
        workflow_id = scheduled_workflow_id(schedule_id, DUE_MS)
        if partition_for(schedule_id, PARTITIONS) != partition_for(workflow_id, PARTITIONS):
            return schedule_id, workflow_id
    raise AssertionError("no schedule id found")


def _create(engine: Engine, schedule_id: str, overlap: str = "ALLOW_ALL") -> None:
    definition = {"action": {"start_workflow": {"workflow_id": schedule_id, "workflow_type": "Tick",
                                                "task_queue": "ticks"}},
                  "spec": {"interval": [{"interval_ms": 1000}], "start_time_ms": DUE_MS, "end_time_ms": DUE_MS},
                  "policy": {"overlap": overlap}}
    engine.send_command(partition_for(schedule_id, PARTITIONS), Record.command("SCHEDULE", "CREATE", {
        "schedule_id": schedule_id, "schedule": orjson.dumps(definition).decode()}))
    engine.commit_all()


def _started(events: list[Record]) -> list[str]:
    return [e.value["workflow_id"] for e in events if e.intent == "WORKFLOW_EXECUTION_STARTED"]


def test_a_schedule_starts_its_workflow_on_another_partition_in_the_batch_of_its_trigger(engine):
    schedule_id, workflow_id = _schedule_elsewhere("elsewhere")
    _create(engine, schedule_id)
    engine.clock.set(DUE_MS)
    relayed = engine.due()
    assert [(pid, cmd.intent) for pid, cmd in relayed] == [(partition_for(workflow_id, PARTITIONS), "START")]
    events = engine.commit_all()
    assert [e.intent for e in events if e.value_type == "SCHEDULE"] == ["ACTION_STARTED"]
    assert _started(events) == [workflow_id]  # in the TRIGGER's batch, not a later one
    started = next(e for e in events if e.intent == "WORKFLOW_EXECUTION_STARTED")
    assert started.partition_id == partition_for(workflow_id, PARTITIONS) and started.source_position == -1
    # Still written for the log, marked so that reading it back skips it.
    (target, start), = engine.written
    assert (target, start.intent, start.relayed) == (partition_for(workflow_id, PARTITIONS), "START", True)


def test_each_due_triggers_start_is_processed_right_after_it_not_after_the_whole_pass(engine):
    """As the engine's loop takes a pass (`kafka/due_commands.py` with the relay after each
    command): TRIGGER, its START, the next TRIGGER, and so on, all in one transaction."""
    pairs = []
    for n in range(200):  # schedules of one partition (one TRIGGER batch), workflows elsewhere
        schedule_id = f"order-{n}"
        workflow_id = scheduled_workflow_id(schedule_id, DUE_MS)
        if partition_for(schedule_id, PARTITIONS) == 0 and partition_for(workflow_id, PARTITIONS) != 0:
            pairs.append((schedule_id, workflow_id))
    pairs = pairs[:4]
    for schedule_id, _ in pairs:
        _create(engine, schedule_id)
    order = []
    for proc in engine.procs:
        proc.on_processed = lambda cmd, hook=proc.on_processed: (
            order.append((cmd.intent, cmd.value.get("schedule_id") or cmd.value["workflow_id"])), hook(cmd))
    engine.clock.set(DUE_MS)
    partitions = {pid: SimpleNamespace(id=pid, checker=checker, processor=proc)
                  for pid, (checker, proc) in enumerate(zip(engine.checkers, engine.procs))}
    touched: set[int] = set()
    engine.relay.begin(dict(enumerate(engine.procs)), touched, 1 << 30)
    due = collect_due(partitions, DUE_MS)
    assert [len(cmd.parts) for _, cmd in due] == [len(pairs)]  # one TRIGGER batch
    process_due(due, partitions, DUE_MS, touched, None, after_each=lambda: engine.relay.relay(touched))
    assert len(engine.relay.relay(touched)) == len(pairs)  # nothing left for after the pass
    workflow_of = dict(pairs)
    triggered = [schedule_id for intent, schedule_id in order if intent == "TRIGGER"]
    assert sorted(triggered) == sorted(workflow_of)
    assert order == [step for schedule_id in triggered
                     for step in (("TRIGGER", schedule_id), ("START", workflow_of[schedule_id]))]
    assert sorted(_started(engine.commit_all())) == sorted(workflow_of.values())


def test_an_aborted_batch_is_relayed_again_and_each_action_starts_once(engine):
    pairs = [_schedule_elsewhere(f"abort{n}") for n in range(5)]
    for schedule_id, _ in pairs:
        _create(engine, schedule_id)
    engine.clock.set(DUE_MS)
    assert len(engine.due()) == 5
    engine.abort_all()  # the transaction of TRIGGERs and relayed STARTs never committed
    assert all(engine.runs_of(workflow_id) == 0 for _, workflow_id in pairs)
    assert len(engine.due()) == 5  # the replay: the checker's TRIGGERs again, relayed again
    events = engine.commit_all()
    assert sorted(_started(events)) == sorted(w for _, w in pairs)
    # A START read back and processed anyway (the engine skips it) would start nothing twice.
    for target, start in engine.written:
        engine.procs[target].process_command(Record.command(start.value_type, start.intent, start.value,
                                                            request_id=start.request_id), 0)
    again = engine.commit_all()
    assert _started(again) == [] and all(engine.runs_of(w) == 1 for _, w in pairs)


def test_commands_for_a_partition_not_owned_are_not_relayed(engine):
    schedule_id, workflow_id = _schedule_elsewhere("not-owned")
    _create(engine, schedule_id)
    engine.clock.set(DUE_MS)
    assert engine.due(owned=[partition_for(schedule_id, PARTITIONS)]) == []
    events = engine.commit_all()
    assert _started(events) == []
    (target, start), = engine.written
    assert target == partition_for(workflow_id, PARTITIONS) and not start.relayed
    assert engine.relay.owned == {partition_for(schedule_id, PARTITIONS)}


def test_a_start_refused_is_answered_in_the_next_round_within_the_bound_of_rounds(tmp_path):
    for rounds, answered in ((2, True), (1, False)):
        engine = Engine(tmp_path / f"r{rounds}")
        engine.relay = Relay(PARTITIONS, max_rounds=rounds)
        try:
            schedule_id, workflow_id = _schedule_elsewhere("refused")
            _create(engine, schedule_id)
            target = partition_for(workflow_id, PARTITIONS)
            engine.send_command(target, Record.command("WORKFLOW", "START", {  # its id is taken already
                "workflow_id": workflow_id, "workflow_type": "Other", "task_queue": "q"}))
            engine.commit_all()
            engine.clock.set(DUE_MS)
            relayed = [cmd.intent for _, cmd in engine.due()]
            assert relayed == (["START", "WORKFLOW_START_FAILED"] if answered else ["START"])
            engine.commit_all()
            failed = [c for _, c in engine.written if c.intent == "WORKFLOW_START_FAILED"]
            assert [c.relayed for c in failed] == [answered]  # beyond the bound: through the log
        finally:
            engine.close()


def test_beyond_the_budget_commands_travel_through_the_log_and_later_ones_for_that_partition_too(engine):
    pairs = []
    for n in range(200):  # three schedules on one partition whose workflows share another
        pair = _schedule_elsewhere(f"budget{n}")
        if partition_for(pair[0], PARTITIONS) == 0 and partition_for(pair[1], PARTITIONS) == 1:
            pairs.append(pair)
    assert len(pairs) >= 3
    for schedule_id, _ in pairs[:3]:
        _create(engine, schedule_id)
    engine.clock.set(DUE_MS)
    assert len(engine.due(budget=2)) == 2
    engine.commit_all()
    assert [c.relayed for _, c in engine.written] == [True, True, False]


def test_a_partition_is_held_while_commands_the_engine_wrote_for_it_are_on_its_log(tmp_path):
    relay = Relay(PARTITIONS)
    writes = PendingWrites(PartitionDb(tmp_path / "p1", 1))
    start = Record.command("WORKFLOW", "START", {"workflow_id": "w", "workflow_type": "T", "task_queue": "q"})
    assert not relay.held(1)
    relay.hold_all()  # a partition was assigned: what was written before may be on the logs
    assert relay.held(1) and relay.held(2)
    headers = relay.sent_through_log(1, start)
    later = relay.sent_through_log(1, start)
    assert relay.read_back(1, headers, writes) is False  # ours, not processed yet: process it
    assert relay.held(1)  # one of ours is still on its log
    assert relay.read_back(1, [*codec.AVRO_HEADERS, (codec.RELAY_HEADER, b"another-engine.1")], writes) is False
    assert relay.held(1)
    assert relay.read_back(1, later, writes) is False
    assert not relay.held(1) and relay.held(2)
    relay.hold_all()  # a rewind: what the aborted transaction wrote never arrives
    assert relay.held(1)
    assert relay.read_back(1, headers, writes) is False  # an earlier session's: does not count
    assert relay.held(1)
    writes.db.close()


def test_a_held_partition_gets_its_commands_through_the_log(engine):
    schedule_id, workflow_id = _schedule_elsewhere("held")
    _create(engine, schedule_id)
    engine.relay.hold_all()
    engine.clock.set(DUE_MS)
    assert engine.due() == []
    assert _started(engine.commit_all()) == []
    assert [c.relayed for _, c in engine.written] == [False]


def test_a_command_too_large_for_its_partition_is_not_relayed_but_refused_there_as_from_the_log(engine):
    """Read from the log, a command beyond the partition's size limit is refused
    (EXCEEDED_SIZE); relayed, it must not be processed after all: which engine owns which
    partitions must not change what a command does."""
    schedule_id, workflow_id = _schedule_elsewhere("too-large")
    _create(engine, schedule_id)
    target = partition_for(workflow_id, PARTITIONS)
    engine.procs[target].limits = Limits(max_command_bytes=64)  # below the size of the START
    engine.clock.set(DUE_MS)
    assert engine.due() == []
    assert _started(engine.commit_all()) == []
    (to, start), = engine.written
    assert (to, start.relayed) == (target, False)  # through the log, where it is refused
    engine.send(target, codec.encode(start))
    assert [e.rejection_type for e in engine.procs[target].output.events] == ["EXCEEDED_SIZE"]
    assert engine.runs_of(workflow_id) == 0


@pytest.mark.parametrize("value", [
    {"workflow_id": "w", "input": None, "workflow_run_timeout_ms": 5, "ratio": 1.5, "flag": True},
    {"workflow_id": "w", "retry_policy": {"maximum_attempts": 2}},  # not plain: read from its JSON
])
def test_a_relayed_part_is_read_as_its_json_says_into_a_value_of_its_own(value):
    record = Record.command("WORKFLOW", "START", value, key=7, request_id="r")
    assert command_batches.part_of(record) is not None
    read = as_read(record)
    part = orjson.loads(record.packed)
    assert (read.value, read.key, read.request_id) == (part["value"], 7, "r")
    assert read.value is not record.value and read.value.get("retry_policy") is not value.get("retry_policy") \
        or value.get("retry_policy") is None
