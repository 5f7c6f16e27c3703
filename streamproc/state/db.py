"""One RocksDB database per partition, and the pending writes of a processing batch.

Processors read through `PendingWrites`, which sees the batch's own earlier writes
first. Nothing reaches RocksDB until the batch's Kafka transaction has committed; then
`PartitionDb.apply` writes the whole batch and the changelog offset it reflects in one
atomic `WriteBatch`, so the local copy is never ahead of the log.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import orjson
from rocksdict import Options, ReadOptions, Rdict, WriteBatch

from streamproc.state.families import LOCAL_CF, Family

_CHECKPOINT_KEY = b"checkpoint"

Write = tuple[Family, bytes]


def _options() -> Options:
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.create_missing_column_families(True)
    return opts


class PartitionDb:
    def __init__(self, path: Path, partition: int) -> None:
        self.path = Path(path)
        self.partition = partition
        self.path.mkdir(parents=True, exist_ok=True)
        families = {f.cf_name: Options(raw_mode=True) for f in Family}
        families[LOCAL_CF] = Options(raw_mode=True)
        self._db = Rdict(str(self.path), options=_options(), column_families=families)
        self._cfs = {f: self._db.get_column_family(f.cf_name) for f in Family}
        self._handles = {f: self._db.get_column_family_handle(f.cf_name) for f in Family}
        self._local = self._db.get_column_family(LOCAL_CF)
        self._local_handle = self._db.get_column_family_handle(LOCAL_CF)

    # reads ------------------------------------------------------------------------------
    def get(self, family: Family, key: bytes) -> bytes | None:
        return self._cfs[family].get(key)

    def scan(self, family: Family, upper_bound: bytes | None = None,
             limit: int | None = None, lower_bound: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """Keys in order from `lower_bound` (inclusive, default the first), stopping before
        `upper_bound` (exclusive)."""
        read_opt = ReadOptions()
        if upper_bound is not None:
            read_opt.set_iterate_upper_bound(upper_bound)
        it = self._cfs[family].iter(read_opt)
        if lower_bound is not None:
            it.seek(lower_bound)
        else:
            it.seek_to_first()
        n = 0
        while it.valid() and (limit is None or n < limit):
            yield it.key(), it.value()
            n += 1
            it.next()

    def first_key(self, family: Family) -> bytes | None:
        it = self._cfs[family].iter()
        it.seek_to_first()
        return it.key() if it.valid() else None

    def count(self, family: Family) -> int:
        return sum(1 for _ in self._cfs[family].keys())

    # checkpoint -------------------------------------------------------------------------
    def checkpoint(self) -> dict:
        """What this copy reflects: {"changelog_offset": last applied offset or -1, ...}."""
        raw = self._local.get(_CHECKPOINT_KEY)
        return orjson.loads(raw) if raw else {"changelog_offset": -1, "written_at_ms": 0}

    # writes -----------------------------------------------------------------------------
    def apply(self, writes: dict[Write, bytes | None], checkpoint: dict) -> None:
        """Write a committed batch and the checkpoint it reflects, atomically."""
        batch = WriteBatch(raw_mode=True)
        for (family, key), value in writes.items():
            if value is None:
                batch.delete(key, self._handles[family])
            else:
                batch.put(key, value, self._handles[family])
        batch.put(_CHECKPOINT_KEY, orjson.dumps(checkpoint), self._local_handle)
        self._db.write(batch)

    def close(self) -> None:
        # Column family objects keep the database open (and its lock held) until they
        # are gone, so drop them before closing: the partition may be reopened in this
        # process when it comes back after a rebalance.
        self._cfs.clear()
        self._handles.clear()
        self._local = self._local_handle = None
        self._db.close()

    @staticmethod
    def destroy(path: Path) -> None:
        shutil.rmtree(path, ignore_errors=True)


class PendingWrites:
    """The writes of the batch being processed, layered over the database.

    Writes of the current command are staged apart so that a command whose processor
    raises leaves no trace (`discard`), while an accepted one joins the batch (`accept`).
    """

    def __init__(self, db: PartitionDb) -> None:
        self.db = db
        self.batch: dict[Write, bytes | None] = {}
        self._staged: dict[Write, bytes | None] = {}

    def get(self, family: Family, key: bytes) -> bytes | None:
        k = (family, key)
        if k in self._staged:
            return self._staged[k]
        if k in self.batch:
            return self.batch[k]
        return self.db.get(family, key)

    def put(self, family: Family, key: bytes, value: bytes) -> None:
        self._staged[(family, key)] = value

    def delete(self, family: Family, key: bytes) -> None:
        self._staged[(family, key)] = None

    def accept(self) -> None:
        self.batch.update(self._staged)
        self._staged.clear()

    def discard(self) -> None:
        self._staged.clear()

    def clear(self) -> None:
        self.batch.clear()
        self._staged.clear()
