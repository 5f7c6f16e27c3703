"""Commands between partitions of one engine, processed in the transaction that writes them.

A partition's processing writes commands for other partitions (a schedule's START to its
workflow's partition, a workflow's close to its schedule, a child's start, a signal, their
answers). Through the log, each costs a produce, a commit, a consume, a decode and a
later transaction: the START of a schedule's action waited for the next batch. When the
engine owns the partition a command goes to, `Relay.relay` hands it to that partition's
processor in the same batch (after each due command, so a START follows its TRIGGER, and
once more after the batch's processing; `Relay.begin` starts a transaction's relaying),
round after round for the commands those write (at most `MAX_ROUNDS`). The command is
still written to the log, marked as processed (`codec.PROCESSED_HEADER`), so the log keeps
every command and reading it back only moves the offset, as for the due-date checker's
commands.

Why this keeps the engine's promises:

- **Exactly once.** A relayed command, its effects and the command that wrote it commit in
  one transaction. An abort rewinds all of it, and the replayed batch relays it again; a
  command read back marked as processed is never processed again, by this engine or by the
  next owner of its partition (whose state, restored from the changelog, has its effects).
- **Order.** A relayed command is processed before commands already waiting on its
  partition's log. Those were written by transactions that did not wait for it: a
  client's (a client that needs its command processed first waits for the answer, as the
  SDK's calls do), or another partition's, so either order is one the log could have had.
  Only a command this engine wrote itself through the log could be a cause of the relayed
  one (a schedule's START, then its TERMINATE of that workflow, with no answer between):
  so the partition is *held* while such a command is on its log unread. Every command for
  an owned partition that is not relayed (beyond the rounds or the budget, or for a held
  partition) is written with `codec.RELAY_HEADER`: this engine's session and the
  command's number for that partition. After every assignment or rewind the partition is
  held until the engine has read its log up to the end it had when the hold began
  (`kafka/relay_catch_up.py`), or has read back one of this session's: the commands an
  earlier owner of a sender (or this engine before a rewind) wrote are before that point
  on the log. While held, its commands travel through the log, in order.
- **The hold clears under a steady flow.** The engine processes a batch while the one
  before commits, so when it relays, the commands it wrote through the log one
  transaction earlier are not read back yet: waiting for them, a partition with commands
  every batch would stay held. Instead `begin` processes them first, in their order
  (every transaction before this one committed: they are on the log, after whatever could
  be their cause), then relays. Read back later they are skipped: by their number in this
  session, and by the partition's mark (`state/relay_marks.py`, written in the
  transaction that processes them) after a rewind or by the partition's next owner. An
  aborted transaction takes its mark with it; the new session processes them when read.
- **A batch processed twice** (a client sends one again, or a replay): each command is
  checked against the state again, relayed or not (a start whose id is taken is refused).
- **Ownership.** Assignments change only while the engine polls, never between
  processing a batch and beginning its transaction; a partition revoked while the
  transaction commits waits for it (the revoke callback finishes the commit), and one that
  consumed commands is fenced by the group generation with its offsets. A transaction of
  due commands and commands processed before they are read back only sends again the
  offsets last committed (`kafka/committed_offsets.py`), when the engine committed some
  since the assignment; else only its transactional id fences it.
- **Size.** A transaction relays at most as many commands as it took from the log and the
  checker, or `max_batch` if that is more: the relay at most doubles a transaction. What is
  left travels through the log (the commands processed before they are read back count
  in it too). So does a command beyond its partition's size limit
  (`Limits.max_command_bytes`), to be refused there as any command read from the log is
  (and so it is if processed before it is read back: from its bytes, as from the log).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

import orjson

from streamproc.engine.partition import PartitionProcessor
from streamproc.protocol import codec, command_batches
from streamproc.protocol.partitioning import partition_for, routing_key_of
from streamproc.protocol.records import Record
from streamproc.state.db import PendingWrites
from streamproc.state.relay_marks import RelayMark

#: Types of the value fields a JSON part gives back as they were written.
_PLAIN = frozenset({str, int, float, bool, type(None)})
#: Rounds of commands written by relayed commands; what the last round writes goes through the log.
MAX_ROUNDS = 4
#: The bytes kept per partition of our commands on its log not read back yet: past them, the
#: later ones are processed when read back, and the partition is held until then.
MAX_UNREAD_BYTES = 16 * 1024 * 1024


class Relay:
    def __init__(self, partition_count: int, max_rounds: int = MAX_ROUNDS,
                 max_unread_bytes: int = MAX_UNREAD_BYTES) -> None:
        self.partition_count = partition_count
        self.max_rounds = max_rounds
        self.max_unread_bytes = max_unread_bytes
        #: The partitions of the last `begin`: commands for them not relayed carry the session.
        self.owned: frozenset[int] = frozenset()
        #: Per partition, the partitions its output's commands go to, as far as the
        #: transaction's relaying looked (the batch writer routes by them instead of hashing
        #: ids again).
        self.targets: dict[int, list[int]] = {}
        #: The transaction's relaying, from `begin`: its partitions, the commands relayed, how
        #: many it may relay, and the partitions its commands reach through the log only.
        self._processors: Mapping[int, PartitionProcessor] = {}
        self._relayed: list[tuple[int, Record]] = []
        self._budget = 0
        self._blocked: set[int] = set()
        self._start(all_held=False)  # nothing written yet: nothing to wait for

    # holds --------------------------------------------------------------------------------
    def hold_all(self) -> None:
        """After an assignment or a rewind: every partition is held until a command this
        engine writes to it through the log from now on is read back."""
        self._start(all_held=True)

    def _start(self, all_held: bool) -> None:
        self._session = uuid.uuid4().hex.encode()  # what an earlier session wrote is not counted
        self._all_held = all_held
        self._next_seq: dict[int, int] = {}  # partition -> the number of our next command for it
        #: partition -> our commands on its log not read back (nor processed) yet: their
        #: bytes by number, and how many bytes in all
        self._unread: dict[int, dict[int, bytes]] = {}
        self._unread_bytes: dict[int, int] = {}
        #: partition -> the number of our first command for it not kept in `_unread` (past
        #: `max_unread_bytes`): from it on, ours are processed when read back, not before.
        self._spilled: dict[int, int] = {}
        self._caught_up: set[int] = set()  # since `hold_all`, partitions that read one back

    @property
    def session(self) -> bytes:
        return self._session

    def catching_up(self, pids) -> list[int]:
        """Those of `pids` held until what was written for them before this session is read."""
        return [pid for pid in pids if not self._read_all_before_us(pid)]

    def read_all_before(self, pid: int) -> None:
        """The engine read `pid`'s log up to its end as of the hold (`kafka/relay_catch_up.py`)."""
        self._caught_up.add(pid)

    def held(self, pid: int) -> bool:
        return pid in self._unread or pid in self._spilled or not self._read_all_before_us(pid)

    def _read_all_before_us(self, pid: int) -> bool:
        """Whether every command an earlier session (an earlier owner) wrote for `pid` is read."""
        return not self._all_held or pid in self._caught_up

    def sent_through_log(self, target: int, record: Record) -> list:
        """A command for an owned `target` goes through the log: the headers to write it with
        (the session and the command's number). Its bytes are kept until read back or processed
        early, up to `max_unread_bytes` for the partition."""
        seq = self._next_seq.get(target, 0)
        self._next_seq[target] = seq + 1
        if record.encoded is None:
            record.encoded = codec.encode(record)  # the bytes the log gets, and `begin` reads
        size = self._unread_bytes.get(target, 0) + len(record.encoded)
        if target not in self._spilled and size <= self.max_unread_bytes:
            self._unread.setdefault(target, {})[seq] = record.encoded
            self._unread_bytes[target] = size
        else:  # never forgotten silently: read back, one not kept is processed (`read_back`)
            self._spilled.setdefault(target, seq)
        return [*codec.AVRO_HEADERS, (codec.RELAY_HEADER, self._session + b"." + str(seq).encode())]

    def read_back(self, pid: int, headers: list | None, writes: PendingWrites) -> bool:
        """A command is read from partition `pid`'s log: whether it was processed already
        (by `begin` or `relay`, before it was read back: skip it). Ours releases the hold at the last."""
        value = codec.header(headers, codec.RELAY_HEADER)
        if value is None:
            return False
        session, _, number = value.rpartition(b".")
        try:
            seq = int(number)
        except ValueError:
            return False  # not numbered: never processed before it was read
        if session != self._session:  # an earlier session's (ours before a rewind, or an earlier owner's)
            return RelayMark(writes).covers(session, seq)
        self._caught_up.add(pid)
        if self._pop_unread(pid, seq) is not None:
            return False
        spilled = self._spilled.get(pid)
        if spilled is not None and seq >= spilled:  # not kept: never processed before
            if seq == self._next_seq[pid] - 1:  # the last we wrote: none of ours is unread
                del self._spilled[pid]
            return False
        return True  # numbered by this session and not unread: processed already

    def _pop_unread(self, pid: int, seq: int) -> bytes | None:
        unread = self._unread.get(pid)
        data = None if unread is None else unread.pop(seq, None)
        if data is not None:
            self._unread_bytes[pid] -= len(data)
            if not unread:
                del self._unread[pid], self._unread_bytes[pid]
        return data

    def _process_unread(self, pid: int, processor: PartitionProcessor, budget: int, count: int,
                        relayed: list[tuple[int, Record]]) -> int:
        """Process our commands on `pid`'s log that are not read back yet, in their order,
        as if read: they were written by transactions that committed, after everything
        before them on that log that could be their cause. The partition's mark says so to
        whoever reads them later (`state/relay_marks.py`). `count` commands are processed in
        this transaction already; returns the count after these (up to `budget`, a BATCH
        counting its parts, a refused command one: it stages its rejection and the mark)."""
        unread = self._unread[pid]
        last = None
        for seq in list(unread):
            if count >= budget:
                break
            # From its bytes, as from the log: one too large is refused as there.
            command = processor.process(self._pop_unread(pid, seq), codec.AVRO_HEADERS, -1)
            if command is not None:
                relayed.append((pid, command))
            count += 1 if command is None else len(command_batches.commands_in(command))
            last = seq
        if last is not None:
            RelayMark(processor.writes).processed(self._session, last)
            processor.writes.accept()
        return count

    # relaying -----------------------------------------------------------------------------
    def target_of(self, source: int, record: Record) -> int:
        """The partition a command goes to: its workflow's or schedule's, else its writer's."""
        routing = routing_key_of(record.value_type, record.value)
        return source if routing is None else partition_for(routing, self.partition_count)

    def run(self, processors: Mapping[int, PartitionProcessor], touched: set[int],
            budget: int) -> list[tuple[int, Record]]:
        """`begin` then `relay`: a transaction's relaying in one call, after its processing."""
        self.begin(processors, touched, budget)
        return self.relay(touched)

    def begin(self, processors: Mapping[int, PartitionProcessor], touched: set[int], budget: int) -> None:
        """A transaction's relaying begins, over the partitions in `processors` (the owned
        ones): our commands the log has not given back yet are processed first (every
        transaction before this one committed, `Engine._step` step 2: they are on the log,
        in order); the partitions that processed one are added to `touched` (their writes, a
        rejection or the mark, must commit even when nothing is relayed). At most `budget`
        commands are relayed in the transaction, those counted."""
        self.owned = frozenset(processors)
        self._processors = processors
        self._relayed = []
        count = 0
        for pid in sorted(self._unread):
            if pid not in processors:  # not ours any more (owned again, it is held anew)
                del self._unread[pid], self._unread_bytes[pid]
                self._spilled.pop(pid, None)
            elif self._read_all_before_us(pid) and count < budget:
                count = self._process_unread(pid, processors[pid], budget, count, self._relayed)
                touched.add(pid)
        self._budget = budget - (count - len(self._relayed))  # `relay` counts relayed records
        self._blocked = {pid for pid in processors if self.held(pid)}  # in order, through the log
        self.targets = {}

    def relay(self, touched: set[int]) -> list[tuple[int, Record]]:
        """Process the commands the `touched` partitions wrote since the last look on their
        partitions, in rounds (at most `max_rounds`: what the last round writes travels
        through the log, and so, in order, does every later command for those partitions);
        adds the partitions that processed one to `touched`. Called after each due command
        (`kafka/due_commands.py`), so a schedule's START follows its TRIGGER, and once more
        after the transaction's processing. Returns every command relayed in the
        transaction so far (at most the budget), with its partition."""
        processors, targets, blocked, relayed = self._processors, self.targets, self._blocked, self._relayed
        sources = sorted(touched)
        for _ in range(self.max_rounds):
            round_: list[tuple[int, Record]] = []
            for source in sources:
                commands = processors[source].output.commands
                routes = targets.setdefault(source, [])
                for record in commands[len(routes):]:  # those not looked at yet
                    target = self.target_of(source, record)
                    routes.append(target)
                    if target not in processors or target in blocked:
                        continue
                    if len(relayed) + len(round_) >= self._budget:
                        blocked.add(target)  # this one and the later ones travel through the log
                        continue
                    if record.packed is None and record.encoded is None:
                        record.encoded = codec.encode(record)  # the bytes the log gets: written once
                    if len(record.packed or record.encoded) > processors[target].limits.max_command_bytes:
                        # Read from the log it is refused as too large: so it goes there, and
                        # the later ones for that partition after it, in order.
                        blocked.add(target)
                        continue
                    round_.append((target, record))
            if not round_:
                return relayed
            for target, record in round_:
                command = as_read(record)
                processors[target].process_command(command, -1)
                record.relayed = True
                touched.add(target)
                relayed.append((target, command))
            sources = sorted({target for target, _ in round_})
        for source in sources:  # the rounds are spent: what the last one wrote goes through the log
            routes = targets.setdefault(source, [])
            for record in processors[source].output.commands[len(routes):]:
                target = self.target_of(source, record)
                routes.append(target)
                blocked.add(target)
        return relayed


def as_read(record: Record) -> Record:
    """The command as the partition would read it from the log (its own copy of the
    value, nothing shared with the state of the partition that wrote it)."""
    if record.packed is not None:  # a batch part (`command_batches.py`): JSON, cheap
        value = record.value
        if all(type(field) in _PLAIN for field in value.values()):
            # Its part was written from this value (so its keys are text, its numbers fit
            # JSON): plain fields read back as they are, and a copy is the part as read.
            return Record.command(record.value_type, record.intent, dict(value),
                                  key=record.key if record.key >= 0 else -1, request_id=record.request_id)
        part = orjson.loads(record.packed)
        return Record.command(record.value_type, record.intent, part["value"], key=part.get("key", -1),
                              request_id=part.get("request_id"))
    return codec.decode(record.encoded if record.encoded is not None else codec.encode(record))
