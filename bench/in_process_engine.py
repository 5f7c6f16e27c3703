"""Partition processors in this process, committing like the engine, for the tools that
count what the engine does per action (`schedule_cost.py`, `workflow_engine_cost.py`).

No broker, a manual clock. `Partitions.commit` does what the engine's batch writer and
commit do with a batch (`kafka/batch_writer.py`, `kafka/engine.py`): it routes the
commands written (packed into BATCH commands as the writer packs them), encodes every
record for the log, builds the changelog records, and applies the writes to RocksDB.
`Partitions.relay` processes the commands a batch wrote for its partitions in that batch,
as the engine's loop does for the partitions it owns (`engine/relay.py`). Kafka's own
costs (produce calls, the transaction) are not in it.

Under `valgrind --tool=callgrind` with `ENGINE_COST_CALLGRIND=<dir>` (the directory of
`--callgrind-out-file`), `Instructions` counts the instructions of each phase exactly,
whatever the machine's load (the interpreter itself, not a launcher script, must run
under valgrind; `PYTHONHASHSEED=0` makes runs repeat; with `--separate-threads=yes` the
processing thread's count is taken, without RocksDB's background threads).
"""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from pathlib import Path

from streamproc.clock import ManualClock
from streamproc.due.checker import partition_checker
from streamproc.engine.partition import PartitionProcessor
from streamproc.engine.relay import Relay
from streamproc.kafka.changelog import changelog_records
from streamproc.protocol import codec
from streamproc.protocol.command_batches import pack
from streamproc.protocol.partitioning import partition_for, routing_key_of
from streamproc.protocol.records import Record
from streamproc.state.db import PartitionDb

CALLGRIND_ENV = "ENGINE_COST_CALLGRIND"


def _encoded(record: Record) -> bytes:
    return record.encoded if record.encoded is not None else codec.encode(record)


class Partitions:
    """P partition processors over temporary databases, committing like the engine."""

    def __init__(self, root: Path, count: int, clock: ManualClock) -> None:
        self.count = count
        self.clock = clock
        self.dbs = [PartitionDb(root / f"p{p}", p) for p in range(count)]
        self.procs = [PartitionProcessor(p, db, clock) for p, db in enumerate(self.dbs)]
        self.checkers = [partition_checker(db) for db in self.dbs]
        for proc, checker in zip(self.procs, self.checkers):
            proc.on_processed = checker.processed
        self.records: Counter = Counter()
        #: Every reply the batches wrote (partition, record), for a tool that reads them.
        self.replies: list[tuple[int, Record]] = []
        self._position = 0
        self._relay = Relay(count)
        self._touched: set[int] = set()

    def relay(self) -> int:
        """What the engine's loop does before it commits (`engine/relay.py`): the commands
        the batch wrote for its partitions (all are this process's) are processed there, in
        the same batch. Returns how many."""
        relayed = self._relay.run(dict(enumerate(self.procs)), set(range(self.count)), 1 << 30)
        self.records["relayed"] += len(relayed)
        return len(relayed)

    def send(self, pid: int, record: Record) -> None:
        """Process `record` on partition `pid`, as read from the log (encoded, decoded)."""
        self.procs[pid].process(_encoded(record), None, self._position)
        self._position += 1

    def commit(self, count: bool = True) -> tuple[list[tuple[int, Record]], list[tuple[str, Record]]]:
        """Every partition's batch: written for the log, applied, its records counted.
        Returns the commands written (with the partition each goes to) and the task records
        (with their queue)."""
        routed, tasks = [], []
        for pid, proc in enumerate(self.procs):
            out = proc.output
            own = []
            routes = self._relay.targets.get(pid, ())  # as the writer does, the relay's routes first
            for i, cmd in enumerate(out.commands):
                if i < len(routes):
                    target = routes[i]
                else:
                    routing = routing_key_of(cmd.value_type, cmd.value)
                    target = pid if routing is None else partition_for(routing, self.count)
                # Relayed ones are written too, marked as processed: packed apart, as the writer does.
                own.append(((target, cmd.relayed), cmd))
            own = pack(own)  # as the engine's batch writer does, per partition's output
            for _, cmd in own:
                cmd.encoded = _encoded(cmd)  # on the log, read back by the partition it goes to
            for record in (*out.events, *(task for _, task in out.tasks), *(reply for _, reply in out.replies)):
                _encoded(record)  # what the batch writer produces
            changelog = changelog_records(proc.writes.batch)
            routed += [(target, cmd) for (target, relayed), cmd in own if not relayed]  # read back: skipped
            tasks += out.tasks
            self.replies += out.replies
            if count:
                self.records.update(events=len(out.events), commands=len(own), tasks=len(out.tasks),
                                    replies=len(out.replies), changelog=len(changelog))
        self._relay.targets = {}  # for this batch only
        if count and any(len(proc.output) for proc in self.procs):
            self.records["transactions"] += 1
        for pid, (proc, db) in enumerate(zip(self.procs, self.dbs)):
            # As the engine's commit does (`kafka/commit.py`, `kafka/engine.py`): not
            # `reset_batch`, which is for an aborted batch and forgets what it kept.
            proc.output.clear()
            proc.writes.seal()
            db.apply(proc.writes.committing, {"changelog_offset": self._position})
            proc.writes.committed()
            self.checkers[pid].refresh()
        return routed, tasks

    def close(self) -> None:
        for db in self.dbs:
            db.close()


class Instructions(Counter):
    """Instructions by phase, counted by callgrind when the tool runs under it (else empty):
    the busiest thread's, or with `all_threads` the sum over the process's threads (work
    handed to other threads, such as a worker's local activities, is the phase's too)."""

    def __init__(self, all_threads: bool = False) -> None:
        super().__init__()
        self.all_threads = all_threads
        self._dumps_before: set[Path] = set()

    def start(self) -> None:
        out_dir = _callgrind_dir()
        if out_dir is not None:
            # Listed before the counters are zeroed: the listing is not the phase's work.
            self._dumps_before = set(out_dir.glob("callgrind.out.*"))
            _callgrind_control("-z")

    def stop(self, phase: str) -> None:
        out_dir = _callgrind_dir()
        if out_dir is None:
            return
        _callgrind_control("-d")
        dumps = set(out_dir.glob("callgrind.out.*")) - self._dumps_before
        totals = [max(int(line.split()[1]) for line in d.read_text().splitlines()  # a dump per thread
                      if line.startswith(("totals:", "summary:"))) for d in dumps]
        if totals:
            self[phase] += sum(totals) if self.all_threads else max(totals)


def _callgrind_dir() -> Path | None:
    """Where callgrind writes its dumps, when the tool runs under it (else None)."""
    return Path(os.environ[CALLGRIND_ENV]) if os.environ.get(CALLGRIND_ENV) else None


def _callgrind_control(command: str) -> None:
    """Zero callgrind's counters (-z), or dump them (-d)."""
    subprocess.run(["callgrind_control", command, str(os.getpid())], check=True, capture_output=True)
