"""Drive one PartitionProcessor without Kafka: commands in, events and state out, manual clock."""

from __future__ import annotations

from streamproc.clock import ManualClock
from streamproc.due.checker import partition_checker
from streamproc.engine.partition import PartitionProcessor
from streamproc.kafka.changelog import changelog_records
from streamproc.protocol import codec
from streamproc.protocol.records import Record
from streamproc.state.db import PartitionDb
from streamproc.state.jobs import Jobs


class Harness:
    def __init__(self, path, partition: int = 0, clock: ManualClock | None = None) -> None:
        self.clock = clock or ManualClock()
        self.db = PartitionDb(path, partition)
        self.proc = PartitionProcessor(partition, self.db, self.clock)
        self.checker = partition_checker(self.db)
        self.proc.on_processed = self.checker.processed
        self.position = 0
        self.events: list[Record] = []
        self.tasks: list[tuple[str, Record]] = []
        self.commands: list[Record] = []
        #: (reply partition, record) answers to commands that named a reply partition
        self.replies: list[tuple[int, Record]] = []
        #: The changelog records of every commit, in order (key, value), as the engine writes them.
        self.changelog: list[tuple[bytes, bytes | None]] = []

    def send(self, record: Record | bytes, headers=None) -> list[Record]:
        """Process one command and commit; returns the events and rejections it produced."""
        data = record if isinstance(record, bytes) else codec.encode(record)
        self.proc.process(data, headers, self.position)
        self.position += 1
        return self.commit()

    def commit(self) -> list[Record]:
        out = self.proc.output
        # round-trip through the codec, as a consumer of the events topic would see them
        events = [codec.decode(codec.encode(r)) for r in out.events]
        self.events += events
        self.tasks += out.tasks
        self.commands += out.commands
        self.replies += out.replies
        self.changelog += changelog_records(self.proc.writes.batch)
        self.db.apply(self.proc.writes.batch, {"changelog_offset": self.position})
        self.proc.reset_batch()
        self.checker.refresh()
        return events

    def check_due(self) -> list[Record]:
        """Run the checker at the current time and process what it writes, like the engine:
        encoded for the log, processed as the record it is."""
        produced = []
        for cmd in self.checker.collect(self.clock.now_ms()):
            cmd.encoded = codec.encode(cmd)
            self.proc.process_command(cmd, -1)
            produced += self.commit()
        return produced

    def job(self, key: int) -> dict | None:
        """The job as its stored document (the JSON keys tests read)."""
        from streamproc.state.db import PendingWrites
        job = Jobs(PendingWrites(self.db)).get(key)
        return job.to_json() if job is not None else None

    def close(self) -> None:
        self.db.close()
