"""Whether a command a client produced is on the log: known yes, known no, or unknown.

A caller that gives up on an answer must say whether its command may still act. Only
two things prove a command is *not* on the log: `produce()` refused it (it never left
this process), or the broker refused it for good (too large, not authorised, no such
topic), which an idempotent producer's retries cannot turn into a success. A delivery
that timed out may have been written by the broker just before the connection died
(librdkafka knows "possibly persisted", but the Python client does not expose it), and
one still queued may go out later: both are unknown.
"""

from __future__ import annotations

import enum

from confluent_kafka import KafkaError

#: Broker or client answers that mean "this record was not and will not be written".
NOT_WRITTEN_CODES = frozenset({
    KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.INVALID_MSG_SIZE, KafkaError.INVALID_MSG,
    KafkaError.RECORD_LIST_TOO_LARGE, KafkaError.INVALID_RECORD,
    KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    KafkaError._UNKNOWN_TOPIC, KafkaError._UNKNOWN_PARTITION,
})


class DeliveryState(enum.Enum):
    PENDING = "pending"          # queued or in flight in the producer
    DELIVERED = "delivered"      # on the log
    NOT_WRITTEN = "not_written"  # certainly not on the log, and never will be
    UNKNOWN = "unknown"          # failed in a way that may have written it (a timeout)

    @property
    def settled(self) -> bool:
        return self is not DeliveryState.PENDING

    @property
    def may_be_on_log(self) -> bool:
        return self is not DeliveryState.NOT_WRITTEN


def state_of_error(err: KafkaError | None) -> DeliveryState:
    """The state a delivery report leaves a record in."""
    if err is None:
        return DeliveryState.DELIVERED
    return DeliveryState.NOT_WRITTEN if err.code() in NOT_WRITTEN_CODES else DeliveryState.UNKNOWN


class Delivery:
    """One produced record's fate, filled in by the producer's delivery report (on the
    thread that polls the producer). Small: a client makes one per command it sends."""

    __slots__ = ("state", "error", "refused_locally")

    def __init__(self, state: DeliveryState = DeliveryState.PENDING, error: str = "") -> None:
        self.state = state
        self.error = error
        #: `produce()` refused it (a full queue, a dead producer): another try may work.
        self.refused_locally = state is DeliveryState.NOT_WRITTEN

    def report(self, err: KafkaError | None, _msg: object = None) -> None:
        """The producer's `on_delivery` callback."""
        self.state = state_of_error(err)
        self.error = "" if err is None else err.str()

    def __repr__(self) -> str:
        return f"Delivery({self.state.value}{', ' + self.error if self.error else ''})"
