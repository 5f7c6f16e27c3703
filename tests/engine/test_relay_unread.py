"""The relay's hold clears under a steady flow (engine/relay.py): the commands the engine
wrote through the log for a partition it owns, not read back yet, are processed in the next
transaction, in their order, and skipped when read back, also after an abort, a rewind or by
the partition's next owner (state/relay_marks.py)."""

from __future__ import annotations

import dataclasses

import orjson
import pytest

from streamproc.engine.relay import Relay
from streamproc.engine.schedules.actions import scheduled_workflow_id
from streamproc.protocol import codec, command_batches
from streamproc.protocol.partitioning import partition_for
from streamproc.protocol.records import Record
from tests.engine.test_command_batches import DUE_MS, PARTITIONS
from tests.engine.test_relay import Engine

SOURCE, TARGET = 0, 1  # the schedules' partition, their workflows'


class LoggedEngine(Engine):
    """The engine with its commands topic: a batch's records become readable once the
    batch after it is processed (the engine processes a batch while the one before commits,
    so the log gives back a transaction's commands two batches later)."""

    def __init__(self, root) -> None:
        super().__init__(root)
        #: Per partition, the commands topic: (batch number, bytes, headers).
        self.log: dict[int, list[tuple[int, bytes, list]]] = {pid: [] for pid in range(PARTITIONS)}
        self.read_to = dict.fromkeys(range(PARTITIONS), 0)  # next offset to read
        self.committed_to = dict.fromkeys(range(PARTITIONS), 0)  # consumer offsets committed
        self.number = 0  # batches committed

    def commit_all(self) -> list[Record]:
        owned = self.relay.owned
        for pid, proc in enumerate(self.procs):
            for command in proc.output.commands:
                target = self.relay.target_of(pid, command)
                headers = codec.PROCESSED_HEADERS if command.relayed else \
                    self.relay.sent_through_log(target, command) if target in owned else codec.AVRO_HEADERS
                data = command.encoded if command.encoded is not None else codec.encode(command)
                self.log[target].append((self.number, data, headers))
        self.number += 1
        self.committed_to = dict(self.read_to)
        return super().commit_all()

    def read(self, before_batch: int) -> None:
        """Process what the log holds of the batches before `before_batch`, as step 1 does."""
        for pid, records in self.log.items():
            while self.read_to[pid] < len(records) and records[self.read_to[pid]][0] < before_batch:
                _, data, headers = records[self.read_to[pid]]
                self.read_to[pid] += 1
                if codec.header(headers, codec.PROCESSED_HEADER) is not None:
                    continue  # an echo
                if not self.relay.read_back(pid, headers, self.procs[pid].writes):
                    self.procs[pid].process(data, headers, self.read_to[pid] - 1)

    def step(self) -> list[tuple[int, Record]]:
        """One batch of the loop: the log read (up to the batch before the one committing),
        the due commands, the relay, the commit."""
        self.read(self.number - 1)
        relayed = self.due()
        self.commit_all()
        return relayed

    def rewind(self) -> None:
        """An abort: the batch is forgotten, the consumer goes back to the committed offsets."""
        self.abort_all()
        self.relay.hold_all()
        self.read_to = dict(self.committed_to)


@pytest.fixture
def engine(tmp_path):
    e = LoggedEngine(tmp_path)
    yield e
    e.close()


def _pairs(count: int) -> list[tuple[str, int]]:
    """Schedule ids on SOURCE whose action at DUE_MS + n s starts a workflow on TARGET."""
    found, n = [], 0
    while len(found) < count:
        schedule_id, due_ms = f"flow-{n}", DUE_MS + len(found) * 1000
        n += 1
        if partition_for(schedule_id, PARTITIONS) == SOURCE and \
                partition_for(scheduled_workflow_id(schedule_id, due_ms), PARTITIONS) == TARGET:
            found.append((schedule_id, due_ms))
    return found


def _create(engine: LoggedEngine, pairs: list[tuple[str, int]]) -> None:
    for schedule_id, due_ms in pairs:
        definition = {"action": {"start_workflow": {"workflow_id": schedule_id, "workflow_type": "Tick",
                                                    "task_queue": "ticks"}},
                      "spec": {"interval": [{"interval_ms": 1000}], "start_time_ms": due_ms, "end_time_ms": due_ms},
                      "policy": {"overlap": "ALLOW_ALL"}}
        engine.send_command(SOURCE, Record.command("SCHEDULE", "CREATE", {
            "schedule_id": schedule_id, "schedule": orjson.dumps(definition).decode()}))
    engine.commit_all()


def _flow(engine: LoggedEngine, pairs: list[tuple[str, int]]) -> list[int]:
    """One action a batch (a steady flow); per batch, the STARTs processed in it on TARGET."""
    starts = []
    for _, due_ms in pairs:
        engine.clock.set(due_ms)
        starts.append(sum(1 for pid, cmd in engine.step() if pid == TARGET and cmd.intent == "START"))
    return starts


def _started(engine: LoggedEngine) -> list[str]:
    return [e.value["workflow_id"] for batch in engine.batches for e in batch
            if e.intent == "WORKFLOW_EXECUTION_STARTED"]


def _workflows(pairs: list[tuple[str, int]]) -> list[str]:
    return [scheduled_workflow_id(schedule_id, due_ms) for schedule_id, due_ms in pairs]


def test_under_a_steady_flow_the_hold_clears_and_every_action_starts_once_in_order(engine):
    pairs = _pairs(8)
    _create(engine, pairs)
    engine.relay.hold_all()  # the partitions were just assigned
    starts = _flow(engine, pairs)
    # Held until its first START through the log is read back (two batches later); then the
    # STARTs not read back yet are processed with the current one, and from then on each in
    # the batch of its TRIGGER.
    assert starts == [0, 0, 2, 1, 1, 1, 1, 1]
    assert [c.relayed for pid, c in engine.written if c.intent == "START"] == [False] * 2 + [True] * 6
    engine.read(engine.number + 1)  # the log read to its end: the STARTs processed early are skipped
    assert _started(engine) == _workflows(pairs)  # once each, in the order they were written
    assert not engine.relay.held(TARGET)


def test_an_aborted_batch_leaves_the_unread_commands_to_the_log(engine):
    pairs = _pairs(5)
    _create(engine, pairs)
    engine.relay.hold_all()
    assert _flow(engine, pairs[:2]) == [0, 0]
    engine.clock.set(pairs[2][1])
    engine.read(engine.number - 1)
    assert [cmd.intent for _, cmd in engine.due()] == ["START", "START"]  # the unread one, then its own
    engine.rewind()  # that transaction aborted: the STARTs it processed are on the log, unprocessed
    engine.read(engine.number + 1)
    engine.commit_all()
    assert _started(engine) == _workflows(pairs[:2])  # read back: processed there, once
    assert _flow(engine, pairs[2:]) == [0, 0, 2]  # the replay, held again after the rewind
    engine.read(engine.number + 1)
    engine.commit_all()
    assert _started(engine) == _workflows(pairs)


def test_after_a_rewind_or_by_the_next_owner_the_commands_processed_early_are_skipped(engine):
    pairs = _pairs(5)
    _create(engine, pairs)
    engine.relay.hold_all()
    assert _flow(engine, pairs[:3]) == [0, 0, 2]  # the second processed before it was read back
    engine.rewind()  # the next batch aborted: the consumer goes back to before that START
    engine.read(engine.number + 1)
    engine.commit_all()
    assert _started(engine) == _workflows(pairs[:3])  # the partition's mark: skipped
    engine.relay = Relay(PARTITIONS)  # the next owner, from the state and offsets before them all
    engine.relay.hold_all()
    engine.read_to = dict.fromkeys(range(PARTITIONS), 0)
    engine.read(engine.number + 1)
    engine.commit_all()
    assert _flow(engine, pairs[3:]) == [0, 0]
    engine.read(engine.number + 1)
    engine.commit_all()
    assert _started(engine) == _workflows(pairs)
    assert all(engine.runs_of(workflow_id) == 1 for workflow_id in _workflows(pairs))


def test_commands_of_an_earlier_session_are_not_taken_for_this_ones():
    relay = Relay(PARTITIONS)
    relay.hold_all()
    assert relay.held(TARGET)
    start = Record.command("WORKFLOW", "START", {"workflow_id": "w", "workflow_type": "T", "task_queue": "q"})
    earlier = relay.sent_through_log(TARGET, start)
    relay.hold_all()  # a rewind: a new session
    ours = relay.sent_through_log(TARGET, start)
    assert codec.header(earlier, codec.RELAY_HEADER) != codec.header(ours, codec.RELAY_HEADER)

    class NoMark:  # the state has no mark: nothing of an earlier session was processed early
        def get(self, family, key):
            return None

    assert relay.read_back(TARGET, earlier, NoMark()) is False and relay.held(TARGET)
    assert relay.read_back(TARGET, ours, NoMark()) is False and not relay.held(TARGET)


def _start(n: int) -> Record:
    return Record.command("WORKFLOW", "START", {"workflow_id": f"w-{n}", "workflow_type": "T", "task_queue": "q"})


def test_a_refused_unread_command_counts_and_leaves_its_partition_work_to_commit(engine):
    """One too large for its partition is refused there, as read from the log: its
    partition has a rejection and a mark to commit though nothing is relayed, and it
    counts in the budget."""
    engine.procs[TARGET].limits = dataclasses.replace(engine.procs[TARGET].limits, max_command_bytes=300)
    large = Record.command("WORKFLOW", "START", {"workflow_id": "w-large", "workflow_type": "T",
                                                 "task_queue": "q", "input": "x" * 400})
    engine.relay.sent_through_log(TARGET, large)
    engine.relay.sent_through_log(TARGET, _start(1))
    touched: set[int] = set()
    relayed = engine.relay.run({pid: engine.procs[pid] for pid in range(PARTITIONS)}, touched, budget=1)
    assert relayed == [] and touched == {TARGET}  # the engine commits `touched`, not only relayed
    assert [e.rejection_type for e in engine.procs[TARGET].output.events] == ["EXCEEDED_SIZE"]
    assert engine.relay.held(TARGET)  # the valid one waits for the next transaction


def test_an_unread_batch_counts_its_commands_in_the_budget(engine):
    batch = command_batches.batch_of([_start(n) for n in range(5)])
    engine.relay.sent_through_log(TARGET, batch)
    engine.relay.sent_through_log(TARGET, _start(9))
    touched: set[int] = set()
    relayed = engine.relay.run({pid: engine.procs[pid] for pid in range(PARTITIONS)}, touched, budget=3)
    assert [len(command_batches.commands_in(cmd)) for _, cmd in relayed] == [5]  # not the next one too
    assert engine.relay.held(TARGET)


def test_past_the_bytes_kept_the_later_commands_are_processed_when_read_back(engine):
    """The unread commands kept are bounded: those past the bound are not forgotten (read
    back, one of this session not kept would be skipped as processed): the partition stays
    held, and they are processed when read back."""
    first = _start(0)
    engine.relay = relay = Relay(PARTITIONS, max_unread_bytes=len(codec.encode(first)))
    headers = [relay.sent_through_log(TARGET, command) for command in (first, _start(1), _start(2))]
    touched: set[int] = set()
    relayed = relay.run({pid: engine.procs[pid] for pid in range(PARTITIONS)}, touched, budget=10)
    assert [cmd.value["workflow_id"] for _, cmd in relayed] == ["w-0"]  # the one kept
    assert relay.held(TARGET)
    writes = engine.procs[TARGET].writes
    assert relay.read_back(TARGET, headers[0], writes) is True  # processed early: skipped
    assert relay.read_back(TARGET, headers[1], writes) is False and relay.held(TARGET)
    assert relay.read_back(TARGET, headers[2], writes) is False and not relay.held(TARGET)
