"""Restoring a partition database from changelog records, as `changelog.restore` does, for
tests that compare the restored state with the engine's."""

from __future__ import annotations

from streamproc.kafka.changelog import changelog_writes, restore_write
from streamproc.state.db import PartitionDb
from streamproc.state.families import Family


def state_of(db: PartitionDb) -> dict:
    """Every family's entries, in key order."""
    return {family: list(db.scan(family)) for family in Family}


def restore_records(db: PartitionDb, records, chunk: int) -> PartitionDb:
    """As `changelog.restore` applies what it reads: chunks of records, each one write batch."""
    for at in range(0, len(records), chunk):
        writes: dict = {}
        for key, value in records[at:at + chunk]:
            for write, written in changelog_writes(key, value):
                restore_write(db, writes, write, written)
        db.apply(writes, {"changelog_offset": at + chunk - 1})
    return db
