"""Entity keys of a partition: the partition id in the top bits, a counter below."""

from __future__ import annotations

from streamproc.protocol.partitioning import encode_key
from streamproc.state.db import PendingWrites
from streamproc.state.families import Family
from streamproc.state.keys import read_u64, u64

#: Counters reserved at a time. The state holds the end of the reserved block, so a batch
#: that takes keys writes it (and mirrors it to the changelog) only when a block runs out,
#: not in every batch. Keys never come twice: whatever was handed out lies below the end
#: the state holds, and a partition reopened (a restart, a takeover, a rewind) starts a
#: new block there; the rest of the old block is skipped (51 bits of counter: plenty).
BLOCK = 1000
#: Looked up once (a member's lookup on its enum class is a Python call per use).
_META = Family.META


class KeyGenerator:
    """Hands out keys; the counter is state like any other, so it survives takeovers."""

    _KEY = b"next_key"

    def __init__(self, writes: PendingWrites, partition: int) -> None:
        self._w = writes
        self._partition = partition
        #: The next counter of the block in use (None: no block yet).
        self._next: int | None = None
        #: The end of the reserved block as the state says, read at the writes' generation
        #: `_end_read_at`: read again only when writes were discarded, cleared or written to
        #: RocksDB since (a read from RocksDB per key was a tenth of a workflow's start).
        self._end = 1
        self._end_read_at: int | None = None

    def next_key(self) -> int:
        if self._end_read_at != self._w.generation:
            raw = self._w.get(_META, self._KEY)
            self._end = read_u64(raw) if raw is not None else 1
            self._end_read_at = self._w.generation
        end = self._end
        counter = self._next
        # The block in use is the one the state (with this batch's writes) says: a block
        # reserved by writes that were discarded or rewound is not, and is reserved again.
        if counter is None or not end - BLOCK <= counter < end:
            counter = end
            self._end = counter + BLOCK
            self._w.put(_META, self._KEY, u64(self._end))
        self._next = counter + 1
        return encode_key(self._partition, counter)
