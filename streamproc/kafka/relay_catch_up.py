"""When a partition held by the relay after an assignment or a rewind (`engine/relay.py`)
has been read far enough to be relayed to again: once the engine's position on its
commands log reaches the end the log had when the hold began, every command written for
it before (by an earlier owner of a sender, or by this engine before a rewind) is read.

The relay's own rule, a command it writes through the log coming back, holds too; but it
sends a command through the log first: the burst of a schedule's actions due right after
an assignment all went that way. The log's end is asked once per partition and hold (one
round trip each); when the broker does not answer, the partitions wait for the relay's
rule until the next hold.
"""

from __future__ import annotations

import sys

from confluent_kafka import Consumer, KafkaException, TopicPartition

from streamproc.engine.relay import Relay

#: How long asking the broker may take (once a hold: a failure stops the asking until the next one).
END_TIMEOUT_S = 2.0
_NEVER = sys.maxsize


class RelayCatchUp:
    def __init__(self) -> None:
        self._session: bytes | None = None
        self._ends: dict[int, int] = {}  # partition -> its log's end, as the hold began
        self._asked: set[int] = set()  # partitions whose committed offset was asked (once a hold)

    def check(self, relay: Relay, consumer: Consumer, topic: str, owned) -> None:
        """After a batch was read (`Engine._step`, step 1): tell the relay which of the
        `owned` partitions it holds are read to their end."""
        waiting = relay.catching_up(owned)
        if not waiting:
            return
        if relay.session != self._session:  # a new hold: the ends are those from now on
            self._session, self._ends, self._asked = relay.session, {}, set()
        for pid in waiting:
            tp = TopicPartition(topic, pid)
            end = self._ends.get(pid)
            try:
                if end is None:
                    end = self._ends[pid] = self._end(consumer, tp)
                if end == _NEVER:
                    continue
                position = consumer.position([tp])[0].offset
                if position < 0:  # nothing read since the hold began: the committed offset says
                    if pid in self._asked:
                        continue  # asked already: what is read from now on will say
                    self._asked.add(pid)
                    position = consumer.committed([tp], timeout=END_TIMEOUT_S)[0].offset
                    if position < 0:
                        position = consumer.get_watermark_offsets(tp, timeout=END_TIMEOUT_S, cached=False)[0]
            except KafkaException:  # the broker is away: ask nothing more until the next hold
                self._ends.update(dict.fromkeys(waiting, _NEVER))
                return
            if position >= end:
                relay.read_all_before(pid)

    @staticmethod
    def _end(consumer: Consumer, tp: TopicPartition) -> int:
        """The partition's end now (its high watermark: a transaction still open below it
        holds the position back until it ends, as it holds back what follows it)."""
        return consumer.get_watermark_offsets(tp, timeout=END_TIMEOUT_S, cached=False)[1]
