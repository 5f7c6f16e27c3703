"""What a Kafka client error means for the engine: retry, abort, a new client, or stop.

librdkafka's transactional API sorts its errors into three kinds (INTRODUCTION.md,
"Transactional Producer", "Error handling"): *retriable* (the call may be made again),
*abortable* (`txn_requires_abort()`: abort the transaction, rewind the input, begin
again) and *fatal* (the instance is dead: destroy it and create a new one, which
`init_transactions` gives a new epoch). An error with none of the three flags, returned
by a transactional call, is to be treated as fatal. *Fenced* is the fatal case that
names an identity: another producer with our transactional id, or another consumer with
our `group.instance.id`, took over. It is our own previous incarnation more often than
not (a transaction the coordinator timed out while the broker was down bumps the epoch;
a static consumer's rejoin whose answer was lost fences the member that sent it), so one
fencing is answered with a new client; only repeated fencing means another live process.

Errors that are not Kafka's (a `TimeoutError` of the admin client, a commit that never
finished, a `RuntimeError` while restoring) are retriable for the engine: it rewinds and
tries again.
"""

from __future__ import annotations

import enum

from confluent_kafka import KafkaError, KafkaException


class Fault(enum.Enum):
    RETRIABLE = "retriable"
    ABORTABLE = "abortable"
    FATAL = "fatal"
    FENCED = "fenced"


class Origin(enum.Enum):
    """Which client an error came from: only that one may need replacing."""

    PRODUCER = "producer"
    CONSUMER = "consumer"
    OTHER = "other"


#: Codes that mean another instance with our identity (or our own previous one) took over.
PRODUCER_FENCED_CODES = frozenset({KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                   KafkaError.INVALID_PRODUCER_EPOCH})
CONSUMER_FENCED_CODES = frozenset({KafkaError.FENCED_INSTANCE_ID})


class ClientFailure(Exception):
    """An error raised by one of the engine's clients, tagged with the client it came from."""

    def __init__(self, origin: Origin, cause: BaseException) -> None:
        super().__init__(f"{origin.value}: {describe(cause)}")
        self.origin = origin
        self.cause = cause


class ProducerCallUnfinished(ClientFailure):
    """init_transactions or abort_transaction timed out and goes on inside the producer:
    the same call on the same instance resumes it ("retry call to resume"). Not a reason to
    replace the producer: a new instance would start over (connect, find the coordinator,
    wait for it to abort what its predecessor left open) and, on a broker that answers
    slowly, time out again at the same point (seen in CI: 9 attempts in 95 s, each on a
    new pair of producers, none finishing). Only up to a bound, though: see
    Recovery._producer_stuck."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(Origin.PRODUCER, cause)


class CommitTimedOut(Exception):
    """A transaction's commit did not finish within its time: its producer is abandoned."""


class IdentityConflict(Exception):
    """Another live process uses this engine's identity (engine id): this one stops."""


def kafka_error(exc: BaseException) -> KafkaError | None:
    if isinstance(exc, ClientFailure):
        exc = exc.cause
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return exc if isinstance(exc, KafkaError) else None


def classify(exc: BaseException | KafkaError, transactional: bool = False) -> Fault:
    """The kind of a failure. `transactional`: the error came from a transactional call,
    where an error with no flag set counts as fatal (librdkafka's recommendation)."""
    error = kafka_error(exc) if isinstance(exc, BaseException) else exc
    if error is None:
        return Fault.RETRIABLE
    if is_fenced(error):
        return Fault.FENCED
    if error.fatal() or error.code() == KafkaError._FATAL:
        return Fault.FATAL
    if error.txn_requires_abort():
        return Fault.ABORTABLE
    if error.retriable():
        return Fault.RETRIABLE
    return Fault.FATAL if transactional else Fault.ABORTABLE


def is_fenced(error: KafkaError) -> bool:
    """A producer fenced by a newer epoch of its transactional id, or a static consumer fenced
    by a newer member with its instance id. A fenced consumer's poll reports the generic
    `_FATAL` code; the cause is only in the text ("Static consumer fenced by ...")."""
    code = error.code()
    if code in PRODUCER_FENCED_CODES or code in CONSUMER_FENCED_CODES:
        return True
    fatal = error.fatal() or code == KafkaError._FATAL
    return fatal and "fenced" in (error.str() or "").lower()


def describe(exc: BaseException | KafkaError) -> str:
    """One line: the error's name and text, without a traceback."""
    if isinstance(exc, ClientFailure):
        exc = exc.cause
    error = kafka_error(exc) if isinstance(exc, BaseException) else exc
    if error is not None:
        return f"{error.name()}: {error.str()}"
    return f"{type(exc).__name__}: {exc}"


class StartRefused(Exception):
    """The engine cannot run as configured (the cluster refuses its credentials, a topic is not
    the one it needs): it stops at once with the reason, one line, instead of retrying."""
