"""What an engine process counted since it started: committed transactions and commands,
due commands and their echoes, partitions restored. Plain counters, read by tests and
logged when the engine stops (the Prometheus metrics are `streamproc.metrics`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class EngineStats:
    #: Committed transactions.
    batches: int = 0
    commands: int = 0
    due_commands: int = 0
    #: Commands processed in the transaction that wrote them, on another owned partition.
    relayed_commands: int = 0
    #: Due commands read back from the log (skipped: processed when they were written).
    echoes: int = 0
    restored_records: int = 0
    restore_seconds: list[float] = field(default_factory=list)

    def restored(self, records: int, seconds: float) -> None:
        """A partition was restored from the changelog."""
        self.restored_records += records
        self.restore_seconds.append(seconds)

    def committed(self, commands: int, due_commands: int, relayed_commands: int = 0) -> None:
        """A transaction committed with this many commands from the log, due and relayed."""
        self.batches += 1
        self.commands += commands
        self.due_commands += due_commands
        self.relayed_commands += relayed_commands

    def summary(self) -> dict[str, Any]:
        """The totals the engine logs when it stops."""
        return {"transactions": self.batches, "commands": self.commands, "due_commands": self.due_commands,
                "relayed_commands": self.relayed_commands,
                "echoes": self.echoes}
