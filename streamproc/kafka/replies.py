"""Answers to our own commands, read from one partition of `<ns>.replies`.

A command that sets `reply_partition` gets its events or rejection (and reply-only
records such as HEARTBEAT_RECORDED) written there with its `request_id`. A process
picks one partition at random, so many workers and clients spread over the topic, and
reads it from its end: older replies were for someone else. Records are dispatched by
request id to whoever registered for it; everything else is skipped.

A broker restart is an ordinary event: `start` waits for the broker within its timeout,
the consumer reconnects by itself and reads on from its position, and a consumer that
fails anyway is replaced at the next offset. Nothing here waits without a bound.
"""

from __future__ import annotations

import dataclasses
import random
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future

import structlog
from confluent_kafka import Consumer, TopicPartition

from streamproc.kafka.batching import close_in_background, consume_available
from streamproc.kafka.client_log import ClientLog
from streamproc.kafka.config import consumer_config
from streamproc.protocol import codec
from streamproc.protocol.records import Record
from streamproc.protocol.topics import Topics

log = structlog.get_logger("streamproc.replies")


@dataclasses.dataclass(frozen=True, slots=True)
class Reply:
    record: Record
    #: When the reply was appended to the log (Kafka timestamp, wall clock). The events
    #: the engine wrote in the same transaction are at about this time on the events topic.
    log_time_ms: int


#: Called with each reply to a request; returning True means "no more, forget me".
ReplyCallback = Callable[[Reply], bool | None]

#: A request nobody answers (the engine is down, the command was lost) must not be
#: remembered forever.
DEFAULT_TTL_S = 600.0


class ReplyListener:
    def __init__(self, bootstrap: str, topics: Topics, partition: int | None = None) -> None:
        self.bootstrap = bootstrap
        self.topics = topics
        self.partition = partition if partition is not None else -1
        self._waiters: dict[str, tuple[ReplyCallback, float]] = {}
        #: Callbacks for the replies to request ids that start with a prefix (`expect_prefix`).
        self._prefixes: dict[str, Callable[[Reply], None]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._consumer: Consumer | None = None
        self._thread: threading.Thread | None = None
        #: The offset of the next reply to read: where a replacement consumer starts.
        self._next_offset = -1
        #: librdkafka's lines and our consume errors, one per kind per interval in an outage.
        self._client_log = ClientLog("replies", interval_s=10)

    def start(self, timeout: float = 60) -> ReplyListener:
        """Pick the partition and its current end; replies to commands sent after this
        returns are seen. Waits up to `timeout` for the engine to create the topic and for
        the broker to answer (it may be restarting); raises TimeoutError after that."""
        topic = self.topics.replies
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._consumer = self._consumer or self._new_consumer()
                if self.partition < 0:
                    self.partition = random.randrange(self._partition_count(deadline))
                # The end offset now, not OFFSET_END: that is resolved on the first fetch, and
                # a reply written before it would be skipped.
                _, end = self._consumer.get_watermark_offsets(
                    TopicPartition(topic, self.partition), max(deadline - time.monotonic(), 0.1))
                break
            except Exception as exc:  # noqa: BLE001 - no broker yet, no topic yet: ask again
                if time.monotonic() >= deadline:
                    if self._consumer is not None:
                        close_in_background(self._consumer)
                        self._consumer = None
                    raise TimeoutError(f"replies partition not readable within {timeout:.1f} s: {exc}") from None
                time.sleep(0.2)
        self._next_offset = end
        self._consumer.assign([TopicPartition(topic, self.partition, end)])
        self._thread = threading.Thread(target=self._run, name="replies", daemon=True)
        self._thread.start()
        return self

    def _partition_count(self, deadline: float) -> int:
        """Partitions of the replies topic, from our own consumer (its lines are throttled).
        Metadata of all topics: asking for one by name would create it on brokers that do."""
        found = self._consumer.list_topics(timeout=max(deadline - time.monotonic(), 0.1)).topics.get(
            self.topics.replies)
        if found is None or found.error is not None or not found.partitions:
            raise RuntimeError(f"topic {self.topics.replies} does not exist (is the engine running "
                               f"with this namespace?)")
        return len(found.partitions)

    def _new_consumer(self) -> Consumer:
        # No group membership and no commits: the group id only satisfies the client.
        return Consumer(consumer_config(
            self.bootstrap, f"{self.topics.namespace}.replies.{uuid.uuid4().hex}", **self._client_log.config()))

    # registering --------------------------------------------------------------------------
    def expect(self, request_id: str, callback: ReplyCallback, ttl_s: float = DEFAULT_TTL_S) -> None:
        """Call `callback` (on the listener's thread) with each reply to `request_id`
        until it returns True, `forget` is called or `ttl_s` passed. Register before sending."""
        with self._lock:
            self._waiters[request_id] = (callback, time.monotonic() + ttl_s)

    def expect_prefix(self, prefix: str, callback: Callable[[Reply], None]) -> None:
        """Call `callback` (on the listener's thread) with each reply to a request id that
        starts with `prefix` and that no `expect` waits for, as long as this listener runs:
        for requests answered only sometimes, and maybe late, too many to register each."""
        with self._lock:
            self._prefixes[prefix] = callback

    def first_reply(self, request_id: str, ttl_s: float = DEFAULT_TTL_S) -> Future[Reply]:
        """A future of the first reply to `request_id` (the event or the rejection)."""
        future: Future[Reply] = Future()

        def resolve(reply: Reply) -> bool:
            if not future.done():
                future.set_result(reply)
            return True

        self.expect(request_id, resolve, ttl_s)
        return future

    def extend(self, request_id: str, ttl_s: float) -> bool:
        """Keep the callback of `request_id` for `ttl_s` from now; False if it is no longer
        registered (it expired or was forgotten: replies to it may have been dropped)."""
        with self._lock:
            entry = self._waiters.get(request_id)
            if entry is None:
                return False
            self._waiters[request_id] = (entry[0], time.monotonic() + ttl_s)
            return True

    def forget(self, request_id: str) -> None:
        with self._lock:
            self._waiters.pop(request_id, None)

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self._waiters)

    # reading ------------------------------------------------------------------------------
    def _run(self) -> None:
        """Read and dispatch until closed. A broker restart is waited out by the consumer
        itself (it reconnects and fetches on from its position); a consumer that fails
        anyway is replaced by a new one at the next offset, so no reply is skipped."""
        next_purge = time.monotonic() + 1
        while not self._stop.is_set():
            try:
                messages = consume_available(self._consumer, 500, 0.1)
            except Exception as exc:  # noqa: BLE001 - a dead consumer: replace it, keep going
                self._replace_consumer(exc)
                continue
            for msg in messages:
                error = msg.error()
                if error is not None:
                    if self._client_log.due(f"message:{error.code()}") is not None:
                        log.warning("reply_consume_error", error=str(error), partition=self.partition)
                    if error.fatal():
                        self._replace_consumer(error)
                        break
                    continue
                self._next_offset = msg.offset() + 1
                try:
                    record = codec.decode(msg.value(), msg.headers())
                except codec.DecodeError as exc:
                    log.warning("reply_undecodable", offset=msg.offset(), error=str(exc))
                    continue
                self._dispatch(record, msg.timestamp()[1])
            if time.monotonic() >= next_purge:
                self._purge_expired()
                next_purge = time.monotonic() + 1

    def _replace_consumer(self, cause: object) -> None:
        log.warning("reply_consumer_replaced", error=str(cause), partition=self.partition,
                    offset=self._next_offset)
        close_in_background(self._consumer)
        self._consumer = self._new_consumer()
        self._consumer.assign([TopicPartition(self.topics.replies, self.partition, self._next_offset)])
        self._stop.wait(1)  # a client that fails at once must not spin

    def _dispatch(self, record: Record, kafka_timestamp_ms: int) -> None:
        if record.request_id is None:
            return
        with self._lock:
            entry = self._waiters.get(record.request_id)
            callback = entry[0] if entry is not None else next(
                (c for prefix, c in self._prefixes.items() if record.request_id.startswith(prefix)), None)
        if callback is None:
            return
        try:
            done = callback(Reply(record, kafka_timestamp_ms))
        except Exception:  # a waiter's bug must not stop replies to everyone else
            log.exception("reply_callback_failed", request_id=record.request_id)
            done = True
        if done and entry is not None:
            self.forget(record.request_id)

    def _purge_expired(self) -> None:
        now = time.monotonic()
        with self._lock:
            expired = [rid for rid, (_, deadline) in self._waiters.items() if deadline <= now]
            for rid in expired:
                del self._waiters[rid]

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        if self._consumer is not None:
            # Bounded: a close may wait on a broker that is away.
            close_in_background(self._consumer).join(10)
            self._consumer = None

    def __enter__(self) -> ReplyListener:
        return self.start() if self._thread is None else self

    def __exit__(self, *exc: object) -> None:
        self.close()

