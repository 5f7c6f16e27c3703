"""What one engine batch did, counted while it is processed and reported once it commits.

The engine processes thousands of commands a second on a small machine, so per command
this costs one dict addition: no lock, no labelled child lookup, nothing of the metrics
library. `EngineMetrics.committed` adds a batch's tally to the totals once its
transaction committed; a batch that is rewound (its transaction failed) is dropped with
its tally and counted when it is processed again, so a command is counted once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from streamproc.protocol.command_batches import commands_in
from streamproc.protocol.records import Record, RecordType

#: The value type and intent a command that could not be decoded is counted under
#: (the rejection the engine writes for it says the same).
UNDECODABLE = ("UNKNOWN", "UNKNOWN")


class BatchTally:
    __slots__ = ("commands", "rejections", "due_lags_ms")

    def __init__(self) -> None:
        #: (partition, value type, intent) -> commands processed.
        self.commands: defaultdict[tuple[int, str, str], int] = defaultdict(int)
        #: (partition, value type, intent, rejection type) -> rejections written.
        self.rejections: defaultdict[tuple[int, str, str, str], int] = defaultdict(int)
        #: (value type, intent) -> how late each due command of the batch fired, in ms.
        self.due_lags_ms: dict[tuple[str, str], list[int]] = {}

    def command(self, partition: int, command: Record | None) -> None:
        """A command from the log was processed (None: it could not be decoded); a batch
        that could be read counts as its commands."""
        if command is not None:
            for one in commands_in(command):  # a BATCH counts as the commands it holds
                self.commands[(partition, one.value_type, one.intent)] += 1
        else:
            self.commands[(partition, *UNDECODABLE)] += 1

    def relayed(self, processed: Iterable[tuple[int, Record]]) -> None:
        """Commands processed on their partitions in the transaction that wrote them
        (`engine/relay.py`)."""
        for partition, command in processed:
            self.command(partition, command)

    def due(self, partition: int, command: Record, lag_ms: int | None) -> None:
        """A due command (timeout, timer, backoff, schedule) the checker wrote and the batch
        processed, `lag_ms` after the time it was due."""
        self.command(partition, command)
        if lag_ms is not None:
            self.due_lags_ms.setdefault((command.value_type, command.intent), []).append(lag_ms)

    def rejections_in(self, partition: int, events: Iterable[Record]) -> None:
        """Count the rejections among a partition's follow-up events of the batch."""
        rejections = self.rejections
        for record in events:
            if record.record_type is RecordType.COMMAND_REJECTION:
                rejections[(partition, record.value_type, record.intent, record.rejection_type)] += 1

    @property
    def size(self) -> int:
        """Commands the batch processed (from the log and due), its transaction's batch size."""
        return sum(self.commands.values())
