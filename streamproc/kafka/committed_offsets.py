"""The consumer offsets this engine last committed, per partition it owns, so that every
transaction carries offsets and with them the consumer group's generation.

A transaction that consumed commands sends their offsets with the group's metadata, and the
broker refuses it if the group moved on (an engine that lost its partitions, a zombie, is
fenced that way). One of due commands only, or of commands processed before they were read
back (`engine/relay.py`), consumed nothing; it sends again the offsets last committed for
the partitions this engine owns and committed since they were assigned: committing an
offset again changes nothing, and the generation is checked. Only offsets that committed
count (a transaction that failed is rewound, the consumer seeks back to them), never the
consumer's position past records not processed yet. A partition not ours any more is
dropped: its next owner commits its offsets.
"""

from __future__ import annotations


class CommittedOffsets:
    def __init__(self) -> None:
        self._committed: dict[int, int] = {}  # partition -> the next offset to read, committed
        self._in_flight: dict[int, int] = {}  # those of the transaction committing

    def for_transaction(self, offsets: dict[int, int]) -> dict[int, int]:
        """The offsets a transaction sends: its own, and the committed ones of the other
        partitions (remembered as in flight until `committed`)."""
        self._in_flight = {**self._committed, **offsets}
        return dict(self._in_flight)

    def committed(self) -> None:
        """The transaction in flight committed: its offsets are the committed ones."""
        self._committed, self._in_flight = self._in_flight, {}

    def drop(self, pid: int) -> None:
        self._committed.pop(pid, None)
        self._in_flight.pop(pid, None)
