"""Which of the commands an engine wrote through the log for this partition it processed
before reading them back (`engine/relay.py`): read back later, by that engine after a
rewind or by the next owner of the partition, they are skipped.

One mark per partition, the last relay session that processed such commands and the last
sequence number it processed (its commands for the partition are numbered in the order
they are on the log). One is enough: a session marks a partition only once it has read
back a command it wrote there itself, so every command of an earlier session lies before
it on the log and is read already, and the offsets committed with the mark are past them.
"""

from __future__ import annotations

from streamproc.state.db import PendingWrites
from streamproc.state.families import Family
from streamproc.state.keys import read_u64, u64


class RelayMark:
    _KEY = b"relay_mark"

    def __init__(self, writes: PendingWrites) -> None:
        self._w = writes

    def covers(self, session: bytes, seq: int) -> bool:
        """Whether command `seq` of `session` was processed when this mark was written."""
        raw = self._w.get(Family.META, self._KEY)
        return raw is not None and raw[8:] == session and seq <= read_u64(raw[:8])

    def processed(self, session: bytes, seq: int) -> None:
        """`session`'s commands up to `seq` are processed (in this batch or earlier)."""
        self._w.put(Family.META, self._KEY, u64(seq) + session)
