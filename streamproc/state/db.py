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
#: What a local copy's layout is, written with every checkpoint: 2 = the due-date indexes of
#: runs and jobs are derived from their documents and the changelog leaves them out
#: (`derived_index.py`). A copy without it was written by an engine from before, which may
#: have stopped half way through a restore, between a document's record and its index's:
#: restored on from there, the index would miss that change, so it is rebuilt instead
#: (`kafka/changelog.py`, `restore`).
STATE_LAYOUT = 2

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
        #: first_key's answers, kept up to date by `apply` (None: the family is empty).
        self._first: dict[Family, bytes | None] = {}
        #: Per family, a key that no live key is smaller than.
        self._floor: dict[Family, bytes] = {}

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
        """The smallest key of `family`, or None when it is empty.

        The checker asks after every commit. Due-date families churn (a timer is put and
        deleted again within milliseconds), and a seek from the start of such a family
        walks over every tombstone not yet compacted away, so the answer is kept and
        updated from the writes, and a new search starts at the last known first key:
        nothing lives below it (`apply` lowers it when a smaller key is put)."""
        if family in self._first:
            return self._first[family]
        it = self._cfs[family].iter()
        floor = self._floor.get(family)
        if floor is None:
            it.seek_to_first()
        else:
            it.seek(floor)
        first = it.key() if it.valid() else None
        self._first[family] = first
        if first is not None:
            self._floor[family] = first
        return first

    def count(self, family: Family) -> int:
        return sum(1 for _ in self._cfs[family].keys())

    # checkpoint -------------------------------------------------------------------------
    def checkpoint(self) -> dict:
        """What this copy reflects: {"changelog_offset": last applied offset or -1, ...}."""
        raw = self._local.get(_CHECKPOINT_KEY)
        return orjson.loads(raw) if raw else {"changelog_offset": -1, "written_at_ms": 0}

    def of_current_layout(self) -> bool:
        """Whether the copy was written in this engine's layout (`STATE_LAYOUT`)."""
        return self.checkpoint().get("layout") == STATE_LAYOUT

    # writes -----------------------------------------------------------------------------
    def apply(self, writes: dict[Write, bytes | None], checkpoint: dict) -> None:
        """Write a committed batch and the checkpoint it reflects, atomically."""
        batch = WriteBatch(raw_mode=True)
        known_first, floors = self._first, self._floor
        for (family, key), value in writes.items():
            if value is None:
                batch.delete(key, self._handles[family])
                if family in known_first and known_first[family] == key:
                    del known_first[family]  # the floor stays: nothing lives below it
            else:
                batch.put(key, value, self._handles[family])
                if family in known_first:
                    first = known_first[family]
                    if first is None or key < first:
                        known_first[family] = key
                if family in floors and key < floors[family]:
                    floors[family] = key
        if STATE_LAYOUT is not None:
            checkpoint = {**checkpoint, "layout": STATE_LAYOUT}
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


#: A staged delete of a key that this batch put and that had no value before it: the
#: batch forgets the key instead of writing a tombstone (`accept`).
_ERASED: bytes = object()  # type: ignore[assignment] - compared by identity only
#: How many decoded values `PendingWrites` keeps (it forgets them all when full).
DECODED_CACHE_SIZE = 4096


class PendingWrites:
    """The writes of the batch being processed, layered over the database.

    Writes of the current command are staged apart so that a command whose processor
    raises leaves no trace (`discard`), while an accepted one joins the batch (`accept`).
    A batch whose transaction is committing (`seal`) stays visible under the next one
    until it is written to RocksDB (`committed`): the engine processes the next batch
    while the previous one commits.

    A value put with the object it was encoded from (`put(..., decoded=)`) is remembered
    with it once its command is accepted, so the next command that reads the same bytes
    takes the object instead of decoding them again (`take_decoded`): a run's document is
    read and written by every command of the run. The object is handed out once (its
    taker changes it) and only for equal bytes, so what it says is what is stored.
    """

    def __init__(self, db: PartitionDb) -> None:
        self.db = db
        self.batch: dict[Write, bytes | None] = {}
        self.committing: dict[Write, bytes | None] = {}
        self._staged: dict[Write, bytes | None] = {}
        self._staged_decoded: dict[Write, tuple[bytes, object]] = {}
        self._decoded: dict[Write, tuple[bytes, object]] = {}
        #: Changes whenever a value read through these writes may have changed other than by
        #: a `put` or `delete` of the reader's own: writes discarded or cleared, a batch
        #: written to RocksDB. A reader that keeps a value it read (`KeyGenerator`) keeps it
        #: only while this stays the same.
        self.generation = 0

    def get(self, family: Family, key: bytes) -> bytes | None:
        k = (family, key)
        if k in self._staged:
            value = self._staged[k]
            return None if value is _ERASED else value
        if k in self.batch:
            return self.batch[k]
        if k in self.committing:
            return self.committing[k]
        return self.db.get(family, key)

    def unwritten(self, family: Family, key: bytes) -> bytes | None:
        """The value the key was given by a batch not in RocksDB yet (this one or the one
        committing), or None: such a key was not put, or was deleted (RocksDB is not read)."""
        k = (family, key)
        for layer in (self._staged, self.batch, self.committing):
            if k in layer:
                value = layer[k]
                return None if value is _ERASED else value
        return None

    def put(self, family: Family, key: bytes, value: bytes, decoded: object = None) -> None:
        k = (family, key)
        self._staged[k] = value
        if decoded is not None:
            self._staged_decoded[k] = (value, decoded)
        elif self._staged_decoded:
            self._staged_decoded.pop(k, None)

    def take_decoded(self, family: Family, key: bytes, value: bytes) -> object | None:
        """The object an accepted command put `value` with, if `value` is still what it
        encoded (else None: decode it); handed out once."""
        entry = self._decoded.pop((family, key), None)
        return entry[1] if entry is not None and entry[0] == value else None

    def delete(self, family: Family, key: bytes) -> None:
        k = (family, key)
        if (self._staged.get(k) is not None or self.batch.get(k) is not None) and not self._existed(k):
            # Put by this batch and gone again (a job's deadline armed by START and disarmed
            # by the COMPLETE sent with it): before the batch as after it, nothing to write.
            self._staged[k] = _ERASED
        else:
            self._staged[k] = None

    def _existed(self, k: Write) -> bool:
        """Whether the key had a value before this batch."""
        if k in self.committing:
            return self.committing[k] is not None
        return self.db.get(*k) is not None

    def accept(self) -> None:
        batch = self.batch
        for k, value in self._staged.items():
            if value is _ERASED:
                batch.pop(k, None)
            else:
                batch[k] = value
        self._staged.clear()
        if self._staged_decoded:
            # Only now: within the command that put it, the object is its processor's own.
            if len(self._decoded) >= DECODED_CACHE_SIZE:
                self._decoded.clear()
            self._decoded.update(self._staged_decoded)
            self._staged_decoded.clear()

    def discard(self) -> None:
        self._staged.clear()
        self._staged_decoded.clear()
        self.generation += 1

    def seal(self) -> None:
        """The batch's writes go to commit; a new batch starts above them."""
        if self.committing:
            raise RuntimeError("the previous batch has not been written yet")
        self.committing, self.batch = self.batch, {}

    def committed(self) -> None:
        """The sealed batch is in RocksDB now."""
        self.committing = {}
        self.generation += 1

    def clear(self) -> None:
        self.generation += 1
        self.batch.clear()
        self.committing = {}
        self._staged.clear()
        self._staged_decoded.clear()
        self._decoded.clear()
