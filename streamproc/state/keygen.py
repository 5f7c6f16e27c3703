"""Entity keys of a partition: the partition id in the top bits, a counter below."""

from __future__ import annotations

from streamproc.protocol.partitioning import encode_key
from streamproc.state.db import PendingWrites
from streamproc.state.families import Family
from streamproc.state.keys import read_u64, u64


class KeyGenerator:
    """Hands out keys; the counter is state like any other, so it survives takeovers."""

    _KEY = b"next_key"

    def __init__(self, writes: PendingWrites, partition: int) -> None:
        self._w = writes
        self._partition = partition

    def next_key(self) -> int:
        raw = self._w.get(Family.META, self._KEY)
        counter = read_u64(raw) if raw is not None else 1
        self._w.put(Family.META, self._KEY, u64(counter + 1))
        return encode_key(self._partition, counter)
