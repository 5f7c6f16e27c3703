"""The engine's consumer session: the member of the `engine` group that is given the
commands topic's partitions, what librdkafka told us about its health, its replacement
when it is dead, and the rewind of the owned partitions to their committed offsets.

The engine decides when to replace it and what to do with the partitions it owned
(`Engine._reconnect`); this module only handles the consumer itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import structlog
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, TopicPartition

from streamproc.kafka.batching import close_in_background, consume_available
from streamproc.kafka.client_log import ClientLog
from streamproc.kafka.engine_clients import engine_consumer_config
from streamproc.kafka.errors import ClientFailure, Origin
from streamproc.kafka.group_standing import GroupStanding
from streamproc.protocol.topics import Topics
from streamproc.settings import Settings

log = structlog.get_logger("streamproc.engine")

#: Bound of the consumer calls of a rewind.
COMMITTED_TIMEOUT_S = 10.0
#: A consumer out of its group this long is replaced (see `group_standing`): 30 s, as the
#: task workers' rejoin, since a broker just restarted loads its groups before it answers.
LEFT_OUT_REPLACE_S = 30.0
#: How often librdkafka reports the consumer's statistics (served by `poll`).
STATS_INTERVAL_MS = 1000

Rebalanced = Callable[[Consumer, list[TopicPartition]], None]


@dataclass(eq=False)
class EngineConsumer:
    """The consumer of the commands topic and what is known of its health (see the module)."""

    settings: Settings
    topics: Topics
    client_log: ClientLog
    #: The engine's rebalance callbacks (on_revoke is called for lost partitions too).
    on_assign: Rebalanced
    on_revoke: Rebalanced
    consumer: Consumer | None = None
    #: The fatal error librdkafka reported for the consumer: it is dead, a new one is made.
    fatal: KafkaError | None = None
    #: Set when a failure left the consumer dead (see recovery.py).
    dead: bool = False
    #: The consumer lost every broker: new producers before the next transaction.
    brokers_lost: bool = False
    #: When (monotonic) the consumer last lost every broker (see recovery.py).
    brokers_lost_at: float = float("-inf")

    def needs_replacing(self) -> bool:
        return self.consumer is None or self.dead or self.fatal is not None

    def poll_commands(self, max_batch: int, timeout_s: float, owned) -> tuple[list[Message], list[Message]]:
        """Consume what is there (waiting up to `timeout_s`): all the messages, and the
        commands among them of the `owned` partitions. An error is logged; a fatal one, or
        the consumer out of its group too long, raises."""
        messages = consume_available(self.consumer, max_batch, timeout_s)
        commands = []
        for msg in messages:
            if (error := msg.error()) is not None:
                if error.fatal() or error.code() == KafkaError._FATAL:
                    self.fatal = error
                self.client_log.error(error)
            elif msg.partition() in owned:
                commands.append(msg)
        if self.fatal is not None:
            raise ClientFailure(Origin.CONSUMER, KafkaException(self.fatal))
        self.check_in_group()
        return messages, commands

    def put_back(self, unprocessed: list[Message], commands: list[Message]) -> list[Message]:
        """Give back `unprocessed` (a suffix of each partition's messages of this poll): seek
        each partition to its first one, so the next polls read them again; answers
        `commands` without them and without what follows them in their partition."""
        first: dict[int, int] = {}
        for msg in unprocessed:
            first.setdefault(msg.partition(), msg.offset())
        for pid, offset in first.items():
            try:
                self.consumer.seek(TopicPartition(self.topics.commands, pid, offset))
            except KafkaException as exc:
                raise ClientFailure(Origin.CONSUMER, exc) from exc
        return [m for m in commands if m.offset() < first.get(m.partition(), m.offset() + 1)]

    def check_in_group(self) -> None:
        """Raise (and mark the consumer dead) when it has been out of its group for
        `LEFT_OUT_REPLACE_S`: nothing else would tell, since such a consumer fails nothing."""
        standing = self.standing
        if standing is not None and standing.left_out_for(time.monotonic()) >= LEFT_OUT_REPLACE_S:
            self.dead = True
            raise ClientFailure(Origin.CONSUMER, RuntimeError(
                f"the consumer has been out of its group for {LEFT_OUT_REPLACE_S:.0f} s "
                f"({standing.describe()}): replacing it"))

    #: Where the consumer stands in its group (fed by its statistics).
    standing: GroupStanding | None = None

    def open(self) -> None:
        logging = self.client_log.config(on_fatal=self._on_fatal, on_all_brokers_down=self._on_brokers_down)
        standing = self.standing = GroupStanding()
        self.consumer = Consumer({**engine_consumer_config(self.settings, self.topics, logging),
                                  "statistics.interval.ms": STATS_INTERVAL_MS, "stats_cb": standing.on_stats})
        self.consumer.subscribe([self.topics.commands], on_assign=self.on_assign,
                                on_revoke=self.on_revoke, on_lost=self.on_revoke)

    def replace(self) -> None:
        """A new consumer with the same static instance id takes the dead one's place in the
        group; the old one is closed on a thread of its own, its callbacks ignored (the
        engine's callbacks check which consumer calls them)."""
        old, self.consumer, self.dead, self.fatal = self.consumer, None, False, None
        if old is not None:
            log.warning("engine_consumer_replaced")
            close_in_background(old)
        self.open()

    def close(self) -> None:
        consumer, self.consumer = self.consumer, None
        if consumer is not None:
            close_in_background(consumer).join(10)

    def _on_fatal(self, error: KafkaError) -> None:
        self.fatal = error

    def _on_brokers_down(self) -> None:
        # The consumer, polled all the time, speaks for the idle producers too: a producer
        # kept across a broker restart hung its first commit up to the deadline (measured,
        # librdkafka 2.16), a new one commits at once. See Engine._begin_commit.
        self.brokers_lost = True
        self.brokers_lost_at = time.monotonic()

    def assigned(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def seek_to_committed(self, owned: list[int]) -> list[int]:
        """Seek each of the `owned` partitions to its committed offset (the beginning when
        none is); answers the partitions that turned out not to be assigned to us any more,
        for the engine to close."""
        if not owned:
            return []
        tps = [TopicPartition(self.topics.commands, pid) for pid in owned]
        try:
            committed = self.consumer.committed(tps, COMMITTED_TIMEOUT_S)
        except KafkaException as exc:
            raise ClientFailure(Origin.CONSUMER, exc) from exc
        gone = []
        for tp in committed:
            try:
                self.consumer.seek(TopicPartition(
                    tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError._STATE or tp.partition in self.assigned():
                    raise ClientFailure(Origin.CONSUMER, exc) from exc
                # Not assigned to this consumer any more (another member has it, or a
                # twin with our static id took our place): let it go and poll on. Failing
                # here would loop on the seek and never poll, and only a poll delivers
                # the fencing that tells us (a twin was seen doing that for minutes).
                gone.append(tp.partition)
        return gone
