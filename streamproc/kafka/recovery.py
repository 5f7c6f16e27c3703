"""What the engine does after a failure: which client to replace, when to try again, what to say.

Every failure of the loop is answered the same way, whatever it was (a Kafka error, a
commit that did not finish in its time, a TimeoutError of the admin client, an error
raised while a rebalance callback restored a partition): abort the transaction, rewind
the owned partitions to their last commit and try again. What differs is the client
that must be replaced (see `streamproc.kafka.errors`):

- the producer, on a fatal or fenced error of a transactional call (a new instance with
  the same transactional id gets a new epoch from init_transactions);
- the consumer, on a fatal error (a static consumer fenced by its own rejoin is one), or
  when its calls timed out twice without a commit between (a broker frozen for 20 s and
  back left the consumer's committed() timing out until it was replaced): a new instance
  with the same `group.instance.id` takes the member's place.

A producer call that timed out inside the producer (init or abort: "retry call to resume")
is made again on the same producer, not on a new one (see ProducerCallUnfinished), but
only `producer_resumes_limit` times in a row: a call that does not finish then is stuck
inside the producer, and both producers are replaced.

Fenced more than `conflict_limit` times within `conflict_window_s` means another live
process has this engine's identity: a producer counts when it was fenced sooner after
its own init_transactions than a transaction can time out (a transaction the coordinator
expired while the broker was away fences its producer too, but only after that long);
a consumer counts when it had not lost every broker for `consumer_fencing_after_s` (after
a broker restart a static consumer is fenced by its own rejoin, and a test that restarts
the broker every 15 s saw that three times in a minute; any lost connection would be too
wide a test: twins fencing each other see connections closed too). Then the engine stops with
`IdentityConflict`.

Retries back off from `backoff_min_s` to `backoff_max_s`; the first failure is logged at
once, later ones are summed up by the watchdog once per interval.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import structlog
from confluent_kafka import KafkaError

from streamproc.kafka.fault_policy import FaultPolicy
from streamproc.kafka.watchdog import Progress
from streamproc.kafka.errors import (CONSUMER_FENCED_CODES, PRODUCER_FENCED_CODES, ClientFailure, CommitTimedOut, Fault,
                                     IdentityConflict, Origin, ProducerCallUnfinished, classify, describe,
                                     kafka_error)

log = structlog.get_logger("streamproc.engine")


@dataclass(frozen=True)
class Decision:
    """The clients a failure leaves dead."""

    producer: bool = False
    #: Both producers: the broker was unreachable (a timeout). The idle producer's
    #: connections and transaction state are as suspect as the failed one's, and a new
    #: pair costs two init_transactions (measured: an idle producer kept across a broker
    #: restart hung its first commit until the deadline).
    producers: bool = False
    consumer: bool = False


class Recovery:
    def __init__(self, engine_id: str, progress: Progress, policy: FaultPolicy, fresh_producer_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.engine_id = engine_id
        self.progress = progress
        self.policy = policy
        #: a producer fenced sooner than this after its init_transactions counts as a conflict
        self.fresh_producer_s = fresh_producer_s
        self._clock = clock
        #: True until the clients are connected and the partitions rewound (also at start)
        self.pending = True
        self._next_attempt = 0.0
        self._fencings: collections.deque[float] = collections.deque()
        #: timeouts of the consumer's calls since the last commit (see `_consumer_stuck`)
        self._consumer_timeouts = _StrikesSinceCommit(self.policy.consumer_timeouts_limit)
        #: producer calls resumed unfinished since the last commit (see `_producer_stuck`)
        self._producer_resumes = _StrikesSinceCommit(self.policy.producer_resumes_limit)

    # the loop ------------------------------------------------------------------------------
    def wait(self, stop: threading.Event) -> bool:
        """Sleep out the backoff; False if the engine was stopped meanwhile."""
        delay = self._next_attempt - self._clock()
        return not (delay > 0 and stop.wait(delay))

    def failed(self, exc: BaseException, producer_age_s: float, partitions: list[int],
               connected_s: float = float("inf")) -> Decision:
        """Record a failure; returns the clients to replace. Raises IdentityConflict when
        another live process holds this engine's identity. `connected_s`: how long ago the
        consumer last lost every broker."""
        p = self.progress
        now = self._clock()
        origin = _origin(exc)
        fault = classify(exc, transactional=origin is Origin.PRODUCER)
        p.last_error = describe(exc)
        p.attempts += 1
        first = p.failing_since is None
        if first:
            p.failing_since = now
            log.error("transaction_failed_rewinding", error=p.last_error, fault=fault.value,
                      client=origin.value, stage=p.stage, partitions=partitions)
        self.pending = True
        self._next_attempt = now + min(self.policy.backoff_max_s,
                                       self.policy.backoff_min_s * 2 ** min(p.attempts - 1, 16))
        dead = fault in (Fault.FATAL, Fault.FENCED)
        # A producer call left unfinished is resumed on the same instance (see the class).
        unreachable = isinstance(exc, CommitTimedOut) or self._producer_stuck(exc) or (
            origin is Origin.PRODUCER and fault is Fault.RETRIABLE and not isinstance(exc, ProducerCallUnfinished))
        decision = Decision(producer=dead and origin is Origin.PRODUCER, producers=unreachable,
                            consumer=(dead or self._consumer_stuck(exc, origin)) and origin is Origin.CONSUMER)
        if fault is Fault.FENCED:
            self._count_fencing(origin, producer_age_s, connected_s, now)
        if not first and (decision.producer or decision.consumer):
            # A client replaced is news even while the watchdog sums up the retries.
            log.warning("kafka_client_dead", client=origin.value, fault=fault.value, error=p.last_error)
        return decision

    def _consumer_stuck(self, exc: BaseException, origin: Origin) -> bool:
        """The consumer's calls timed out `consumer_timeouts_limit` times since the last commit:
        replace it. Seen in CI after a broker stalled for 20 s and came back: the consumer's
        committed() timed out on every attempt for 45 s, until the watchdog replaced every
        client, and the new consumer answered at once."""
        error = kafka_error(exc)
        if origin is not Origin.CONSUMER or error is None or error.code() != KafkaError._TIMED_OUT:
            return False
        return self._consumer_timeouts.strike()

    def _producer_stuck(self, exc: BaseException) -> bool:
        """A producer call was resumed `producer_resumes_limit` times and still did not finish:
        replace the producers. Seen with a broker frozen past its session timeout right after
        a crash restart: once it went on, answering everything else, a producer's
        init_transactions kept timing out with its request queued for the transaction
        coordinator and never sent, until the watchdog replaced every client after 60 s;
        a new producer finished its init at once."""
        if not isinstance(exc, ProducerCallUnfinished):
            return False
        return self._producer_resumes.strike()

    def reconnected(self) -> None:
        self.pending = False

    def committed(self) -> None:
        """A transaction committed: the engine is healthy again (called only after a failure)."""
        p = self.progress
        log.info("engine_recovered", seconds=round(self._clock() - p.failing_since, 1), attempts=p.attempts)
        p.failing_since = None
        p.attempts = 0
        p.last_error = ""
        self._consumer_timeouts.clear()
        self._producer_resumes.clear()

    # identity ------------------------------------------------------------------------------
    def _count_fencing(self, origin: Origin, producer_age_s: float, connected_s: float, now: float) -> None:
        if origin is Origin.PRODUCER and producer_age_s >= self.fresh_producer_s:
            return  # an expired transaction of ours, most likely
        if origin is not Origin.PRODUCER and connected_s < self.policy.consumer_fencing_after_s:
            return  # our own rejoin after a broker came back, most likely
        window = self.policy.conflict_window_s
        fencings = self._fencings
        fencings.append(now)
        while fencings and now - fencings[0] > window:
            fencings.popleft()
        if len(fencings) >= self.policy.conflict_limit:
            raise IdentityConflict(
                f"engine id {self.engine_id!r} is in use by another live process: its {origin.value} was "
                f"fenced {len(fencings)} times within {window:.0f} s; give each engine process its own "
                f"STREAMPROC_ENGINE_ID")


def _origin(exc: BaseException) -> Origin:
    """The client an error came from: as tagged by the engine, or named by a fencing code."""
    error = kafka_error(exc)
    if error is not None:
        if error.code() in PRODUCER_FENCED_CODES:
            return Origin.PRODUCER
        if error.code() in CONSUMER_FENCED_CODES or "static consumer" in (error.str() or "").lower():
            return Origin.CONSUMER
    return exc.origin if isinstance(exc, ClientFailure) else Origin.OTHER


class _StrikesSinceCommit:
    """Calls of one client that did not finish since the last commit; at `limit` the client
    is given up (and the count starts again)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0

    def strike(self) -> bool:
        self.count += 1
        if self.count < self.limit:
            return False
        self.count = 0
        return True

    def clear(self) -> None:
        self.count = 0
