"""Calls that send a command and wait for the engine's answer, across a broker outage.

A call registers its request id with a `ReplyListener`, produces its command and waits
for the answer until its deadline (`rpc_timeout`). A call is a coroutine: the answer is
resolved on the listener's thread and handed to the caller's event loop with
``call_soon_threadsafe`` (``asyncio.wrap_future``), so a thousand waiting calls cost no
thread each; delivery reports are served by one polling thread per channel. While the broker is away, a copy of
the command waits in this channel's producer for at most the resend interval (its
`message.timeout.ms`); one that timed out is sent again, **with the same request id**,
and so on until the deadline. A copy that reached the log but got no answer within the
interval is sent again too when the request is idempotent: the engine answers a
repeated START with the run that request id started (Temporal's rule, SEMANTICS.md 4),
and DESCRIBE only reads.

At the deadline the call says what it knows:

* a copy may be on the log (delivered, timed out in flight, still queued): the outcome
  is unknown, `RequestOutcomeUnknownError` (for a start `WorkflowStartOutcomeUnknownError`)
  with the request id to look it up by; a copy still queued can land no later than its
  message timeout, `may_land_until`;
* every copy certainly missed the log (the producer or the broker refused it for good,
  or the topic could not even be found): `RequestNotSentError`; sending again is safe.

A request that is not idempotent (cancel, terminate, schedule an activity) is sent again
only after a copy failed to reach the log; if a later copy is refused while an earlier
one may have landed, the refusal may be the earlier copy's doing ("already requested"),
so the outcome is reported as unknown rather than as the refusal.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from datetime import timedelta
from typing import Any

import structlog
from confluent_kafka import KafkaException, Producer

from streamproc.client.delivery import Delivery, DeliveryState
from streamproc.client.errors import RequestNotSentError, RequestOutcomeUnknownError
from streamproc.kafka.client_log import ClientLog
from streamproc.kafka.config import producer_config
from streamproc.protocol import codec
from streamproc.protocol.records import Record, RecordType

log = structlog.get_logger("streamproc.client")

#: Builds the command once the reply partition is known.
RecordFor = Callable[[int], Record]
#: Picks the commands partition once their number is known.
PartitionFor = Callable[[int], int]
#: Called on the listener's thread with each reply to the request; resolves `answer` and
#: returns True when the answer is complete.
OnReply = Callable[[Any, Future], bool]


class RequestChannel:
    """One producer and one replies partition for a client's request/answer calls."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.resend_s = max(client.resend_interval_s, 1.0)
        self._replies = None
        self._producer: Producer | None = None
        self._lock = threading.Lock()
        self._client_log = ClientLog("client-requests", interval_s=10)
        self._closed = threading.Event()
        self._poller: threading.Thread | None = None

    # the call ---------------------------------------------------------------------------
    async def call(self, record_for: RecordFor, partition_for: PartitionFor, on_reply: OnReply,
                   rpc_timeout: float | timedelta, *, request_id: str, intent: str, idempotent: bool,
             not_sent: Callable[[str], Exception] | None = None,
             unknown: Callable[[str, bool | None, float], Exception] | None = None) -> Any:
        """Send the command and return what `on_reply` resolved its answer with.

        `not_sent(message)` and `unknown(message, delivered, may_land_until)` build the
        errors a caller wants instead of the generic ones."""
        if isinstance(rpc_timeout, timedelta):  # Temporal's type for it
            rpc_timeout = rpc_timeout.total_seconds()
        not_sent = not_sent or (lambda m: RequestNotSentError(m, intent=intent, request_id=request_id))
        unknown = unknown or (lambda m, d, u: RequestOutcomeUnknownError(
            m, intent=intent, request_id=request_id, delivered=d, may_land_until=u))
        deadline = time.monotonic() + rpc_timeout
        try:
            replies = self._replies
            if replies is None:  # the first call: finding the partition waits on the broker
                replies = await asyncio.to_thread(self._listener, max(deadline - time.monotonic(), 0.1))
            partitions = self.client.known_partitions
            if partitions is None:
                partitions = await asyncio.to_thread(self.client.partition_count,
                                                     max(deadline - time.monotonic(), 0.1))
            partition = partition_for(partitions)
        except Exception as exc:  # noqa: BLE001 - no broker within the deadline: nothing was sent
            raise not_sent(f"{intent} (request id {request_id}) not sent: the broker did not answer within "
                           f"{rpc_timeout} s ({exc})") from None
        record = record_for(replies.partition)
        answer: Future = Future()
        answered = asyncio.wrap_future(answer)
        replies.expect(request_id, lambda reply: on_reply(reply, answer), rpc_timeout + self.resend_s)
        copies: list[tuple[float, Delivery]] = []
        try:
            while True:
                now = time.monotonic()
                last = copies[-1][1] if copies else None
                if last is not None and last.state is DeliveryState.NOT_WRITTEN and not last.refused_locally:
                    break  # the broker refused it for good (too large, not authorised): every copy would be
                if last is None or self._resend_due(copies, now, idempotent):
                    copies.append((now, self._send(record, partition)))
                    suppressed = self._client_log.due("request_resent") if len(copies) > 1 else None
                    if suppressed is not None:  # one line per interval, however many calls wait
                        log.warning("request_resent", intent=intent, request_id=request_id, copy=len(copies),
                                    previous=copies[-2][1].state.value, suppressed=suppressed)
                remaining = deadline - now
                if remaining <= 0:
                    break
                # Wake now and then to look at the copies' delivery reports.
                await asyncio.wait([answered], timeout=min(remaining, 0.25))
                if answered.done():
                    return self._answered(answered.result(), copies, idempotent, unknown, intent, request_id)
        finally:
            replies.forget(request_id)
            if not answered.done():
                answered.cancel()
        return self._give_up(copies, rpc_timeout, not_sent, unknown, intent, request_id)

    def _resend_due(self, copies: list[tuple[float, Delivery]], now: float, idempotent: bool) -> bool:
        sent_at, last = copies[-1]
        if last.state is DeliveryState.PENDING:
            return False  # still in the producer: it goes out when the broker is back
        if last.state is DeliveryState.NOT_WRITTEN:
            return now - sent_at >= 0.5  # the producer refused it (full queue?): a moment
        if last.state is DeliveryState.UNKNOWN:
            return True  # timed out: the broker was away; try again at once
        return idempotent and now - sent_at >= self.resend_s  # on the log, no answer yet

    @staticmethod
    def _answered(result: Any, copies: list[tuple[float, Delivery]], idempotent: bool,
                  unknown: Callable[[str, bool | None, float], Exception], intent: str, request_id: str) -> Any:
        record = getattr(result, "record", result)
        earlier_may_have_landed = any(d.state.may_be_on_log for _, d in copies[:-1])
        if (not idempotent and earlier_may_have_landed and isinstance(record, Record)
                and record.record_type is RecordType.COMMAND_REJECTION):
            raise unknown(f"{intent} (request id {request_id}) has an unknown outcome: it was sent "
                          f"{len(copies)} times across a broker outage, an earlier copy may have been "
                          f"applied, and a later one was refused: {record.rejection_reason}", True, time.time())
        return result

    def _give_up(self, copies: list[tuple[float, Delivery]], rpc_timeout: float,
                 not_sent: Callable[[str], Exception],
                 unknown: Callable[[str, bool | None, float], Exception], intent: str, request_id: str) -> Any:
        states = [d.state for _, d in copies]
        if not any(s.may_be_on_log for s in states):
            raise not_sent(f"{intent} (request id {request_id}) not sent: {copies[-1][1].error}")
        delivered = True if DeliveryState.DELIVERED in states else None
        # A copy still in the producer is given up within its message timeout, or, sent just
        # before that, its request timeout after: the broker writes it by then or never.
        pending = [t for t, d in copies if d.state is DeliveryState.PENDING]
        may_land_until = time.time() + (max(pending) + 2 * self.resend_s - time.monotonic() if pending else 0)
        where = ("it is on the log but the engine did not answer (is one running for this namespace?)"
                 if delivered
                 else "the broker did not confirm it (it was away)")
        raise unknown(f"{intent} (request id {request_id}) has an unknown outcome: no answer within "
                      f"{rpc_timeout} s and {where}; {len(copies)} copies sent", delivered, may_land_until)

    # transport --------------------------------------------------------------------------
    def _send(self, record: Record, partition: int) -> Delivery:
        delivery = Delivery()
        key = str(record.key if record.key >= 0 else record.request_id).encode()
        producer = self._get_producer()
        try:
            producer.produce(self.client.topics.commands, codec.encode(record), key, partition=partition,
                             headers=codec.AVRO_HEADERS, on_delivery=delivery.report)
        except BufferError as exc:
            return Delivery(DeliveryState.NOT_WRITTEN, f"the producer's queue is full ({exc})")
        except KafkaException as exc:
            if exc.args[0].fatal():
                self._replace_producer(producer)
            return Delivery(DeliveryState.NOT_WRITTEN, f"the producer refused it: {exc}")
        return delivery

    def _get_producer(self) -> Producer:
        with self._lock:
            if self._producer is None:
                # A copy is given up after the resend interval, queued or in flight, so a call
                # that gave up knows by when its last copy lands or never does.
                timeout_ms = int(self.resend_s * 1000)
                self._producer = Producer(producer_config(
                    self.client.bootstrap, **{"message.timeout.ms": timeout_ms, "request.timeout.ms": timeout_ms,
                                              **self._client_log.config(), **self.client._producer_overrides}))
                if self._poller is None or not self._poller.is_alive():  # first use, or used again after close
                    self._closed.clear()
                    self._poller = threading.Thread(target=self._poll, name="client-requests", daemon=True)
                    self._poller.start()
            return self._producer

    def _replace_producer(self, dead: Producer) -> None:
        with self._lock:
            if self._producer is dead:
                log.warning("request_producer_replaced")
                self._producer = None

    def _poll(self) -> None:
        """Serve delivery reports: they settle each copy's `Delivery`."""
        while not self._closed.is_set():
            producer = self._producer
            if producer is None:
                self._closed.wait(0.05)
                continue
            try:
                producer.poll(0.05)
            except Exception:  # noqa: BLE001 - a callback's error must not stop the reports
                log.exception("request_delivery_poll_failed")

    async def replies(self, timeout: float):
        """Our `ReplyListener` (started, waiting up to `timeout` for the broker if need be),
        for answers that are not one call's: a run's close sent to us when it comes."""
        return self._replies or await asyncio.to_thread(self._listener, timeout)

    def _listener(self, timeout: float):
        with self._lock:
            if self._replies is None:
                # Imported here: the worker package imports the client.
                from streamproc.kafka.replies import ReplyListener

                self._replies = ReplyListener(self.client.bootstrap, self.client.topics).start(timeout)
            return self._replies

    def close(self, timeout: float = 10) -> None:
        """Wait up to `timeout` for copies still queued, then stop."""
        with self._lock:
            producer, self._producer = self._producer, None
            replies, self._replies = self._replies, None
        if producer is not None:
            producer.flush(timeout)
        self._closed.set()
        if self._poller is not None:
            self._poller.join(5)
        if replies is not None:
            replies.close()
