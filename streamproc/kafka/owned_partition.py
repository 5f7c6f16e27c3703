"""A partition the engine owns: its local RocksDB, restored from the changelog, with the
processor and the due-date checker that run over it.

Opening restores the local copy up to the changelog's end; a local copy the changelog
cannot continue (`StaleLocalState`: it was truncated, or the copy is from another
cluster) is thrown away and rebuilt from the changelog alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import structlog

from streamproc.clock import Clock
from streamproc.due.checker import DueDateChecker, partition_checker
from streamproc.engine.partition import PartitionProcessor
from streamproc.engine.processing import Limits
from streamproc.kafka.changelog import StaleLocalState
from streamproc.state.db import PartitionDb

log = structlog.get_logger("streamproc.engine")

#: Bound of a restore's first answer from the broker.
RESTORE_CONNECT_TIMEOUT_S = 10.0


@dataclass
class OwnedPartition:
    """What the engine holds for one partition it owns."""

    id: int
    db: PartitionDb
    processor: PartitionProcessor
    checker: DueDateChecker
    changelog_offset: int = -1

    @classmethod
    def over(cls, db: PartitionDb, clock: Clock, limits: Limits, namespace: str) -> OwnedPartition:
        """The processor and checker over a restored `db`, from its checkpoint on."""
        pid = db.partition
        processor = PartitionProcessor(pid, db, clock, limits, namespace)
        checker = partition_checker(db)
        processor.on_processed = checker.processed
        return cls(pid, db, processor, checker, db.checkpoint()["changelog_offset"])


def open_restored(path: Path, pid: int, restore: Callable[[PartitionDb, int], int]) -> tuple[PartitionDb, int]:
    """Open the partition's local copy at `path` and bring it up to the changelog's end
    with `restore`; answers the db and how many records were applied."""
    db = PartitionDb(path, pid)
    try:
        try:
            applied = restore(db, pid)
        except StaleLocalState as exc:
            log.warning("local_state_stale_rebuilding", partition=pid, reason=str(exc))
            db.close()
            PartitionDb.destroy(path)
            db = PartitionDb(path, pid)
            applied = restore(db, pid)
    except BaseException:
        db.close()  # its lock too: the partition is opened again by the next rewind
        raise
    return db, applied
