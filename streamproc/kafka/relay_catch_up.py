"""When a partition held by the relay after an assignment or a rewind (`engine/relay.py`)
has been read far enough to be relayed to again: once the engine's position on its
commands log reaches the end the log had when the hold began, every command written for
it before (by an earlier owner of a sender, or by this engine before a rewind) is read.

The relay's own rule, a command it writes through the log coming back, holds too; but it
sends a command through the log first: the burst of a schedule's actions due right after
an assignment all went that way. The log's end is asked once per partition and hold (one
round trip each), and the committed offsets of those not read since in one request; when
the broker does not answer, the partitions wait for the relay's rule until the next hold.
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
        try:
            for pid in waiting:
                if pid not in self._ends:
                    self._ends[pid] = self._end(consumer, TopicPartition(topic, pid))
            live = [pid for pid in waiting if self._ends[pid] != _NEVER]
            if not live:
                return
            positions = {tp.partition: tp.offset
                         for tp in consumer.position([TopicPartition(topic, pid) for pid in live])}
            # Nothing read since the hold began: the committed offset says (asked once a
            # hold, for all those partitions in one request; then what is read will say).
            ask = [pid for pid in live if positions[pid] < 0 and pid not in self._asked]
            if ask:
                self._asked.update(ask)
                asked = consumer.committed([TopicPartition(topic, pid) for pid in ask], timeout=END_TIMEOUT_S)
                for tp in asked:
                    positions[tp.partition] = tp.offset if tp.offset >= 0 else consumer.get_watermark_offsets(
                        TopicPartition(topic, tp.partition), timeout=END_TIMEOUT_S, cached=False)[0]
        except KafkaException:  # the broker is away: ask nothing more until the next hold
            self._ends.update(dict.fromkeys(waiting, _NEVER))
            return
        for pid in live:
            if positions[pid] >= 0 and positions[pid] >= self._ends[pid]:
                relay.read_all_before(pid)

    @staticmethod
    def _end(consumer: Consumer, tp: TopicPartition) -> int:
        """The partition's end now (its high watermark: a transaction still open below it
        holds the position back until it ends, as it holds back what follows it)."""
        return consumer.get_watermark_offsets(tp, timeout=END_TIMEOUT_S, cached=False)[1]
