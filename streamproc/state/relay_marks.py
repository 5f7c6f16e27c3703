"""Which of the commands an engine wrote through the log for this partition it processed
before reading them back (`engine/relay.py`): read back later, by that engine after a
rewind or by the next owner of the partition, they are skipped.

One mark per partition, the last relay session that processed such commands and the last
sequence number it processed (its commands for the partition are numbered in the order
they are on the log). One is enough: a session processes a partition's commands early, and
so marks it, only once the engine has read that partition's log up to its end as measured
when the hold began (`kafka/relay_catch_up.py`), or has read back a command the session
wrote there itself. Every command of an earlier session lies before that end, so it is
read already, and the offsets of everything before that end are committed in the same
transaction as the mark or earlier: a rewind or the next owner never reads an earlier
session's command after the mark has replaced that session's. This relies on a rewind
seeking the consumer back to the committed offsets (`put_back` and the recovery seek:
librdkafka resets the position on a seek), so what is read after the hold is read again.
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
