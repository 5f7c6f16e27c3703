"""What a client call concludes from its copies' deliveries, without a broker: when it
sends again, and what it says when it gives up (the outage tests show it on a broker)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError

from streamproc.client.delivery import Delivery, DeliveryState, state_of_error
from streamproc.client.errors import RequestNotSentError, RequestOutcomeUnknownError
from streamproc.client.requests import RequestChannel
from streamproc.protocol.records import Record, RecordType

D = DeliveryState


def delivery(err: int | None = None) -> Delivery:
    d = Delivery()
    d.report(None if err is None else KafkaError(err))
    return d


def refused_locally() -> Delivery:
    return Delivery(D.NOT_WRITTEN, "the producer's queue is full")


@pytest.mark.parametrize("code, state", [
    (None, D.DELIVERED),
    (KafkaError._MSG_TIMED_OUT, D.UNKNOWN),       # may have been written just before the broker died
    (KafkaError._TRANSPORT, D.UNKNOWN),
    (KafkaError.MSG_SIZE_TOO_LARGE, D.NOT_WRITTEN),
    (KafkaError.TOPIC_AUTHORIZATION_FAILED, D.NOT_WRITTEN),
    (KafkaError._UNKNOWN_PARTITION, D.NOT_WRITTEN),
])
def test_a_delivery_report_says_on_the_log_not_on_it_or_unknown(code, state):
    assert state_of_error(None if code is None else KafkaError(code)) is state
    d = delivery(code)
    assert d.state is state and not d.refused_locally


@pytest.fixture
def channel():
    return RequestChannel(SimpleNamespace(resend_interval_s=5.0))


def test_a_queued_copy_is_not_sent_again_a_timed_out_one_at_once(channel):
    now = time.monotonic()
    assert not channel._resend_due([(now - 60, Delivery())], now, idempotent=True)
    assert channel._resend_due([(now, delivery(KafkaError._MSG_TIMED_OUT))], now, idempotent=False)
    assert not channel._resend_due([(now, refused_locally())], now, idempotent=True)
    assert channel._resend_due([(now - 1, refused_locally())], now, idempotent=True)


def test_a_delivered_copy_without_answer_is_sent_again_only_if_the_engine_dedupes_it(channel):
    now = time.monotonic()
    assert not channel._resend_due([(now - 4, delivery())], now, idempotent=True)
    assert channel._resend_due([(now - 5, delivery())], now, idempotent=True)
    assert not channel._resend_due([(now - 60, delivery())], now, idempotent=False)


def give_up(channel, *deliveries: Delivery) -> Exception:
    copies = [(time.monotonic(), d) for d in deliveries]
    with pytest.raises(Exception) as raised:
        channel._give_up(copies, 30, lambda m: RequestNotSentError(m, intent="START", request_id="r-1"),
                         lambda m, d, u: RequestOutcomeUnknownError(m, intent="START", request_id="r-1",
                                                                    delivered=d, may_land_until=u),
                         "START", "r-1")
    return raised.value


def test_giving_up_says_unknown_whenever_a_copy_may_be_on_the_log(channel):
    on_log = give_up(channel, delivery(KafkaError._MSG_TIMED_OUT), delivery())
    assert isinstance(on_log, RequestOutcomeUnknownError) and on_log.delivered is True
    assert "r-1" in str(on_log) and "on the log but the engine did not answer" in str(on_log)
    queued = give_up(channel, delivery(KafkaError._MSG_TIMED_OUT), Delivery())
    assert isinstance(queued, RequestOutcomeUnknownError) and queued.delivered is None
    assert time.time() + 9 < queued.may_land_until <= time.time() + 10  # twice the resend interval
    timed_out = give_up(channel, delivery(KafkaError._MSG_TIMED_OUT))
    assert isinstance(timed_out, RequestOutcomeUnknownError) and timed_out.may_land_until <= time.time()


def test_giving_up_says_not_sent_only_when_no_copy_can_be_on_the_log(channel):
    error = give_up(channel, refused_locally(), delivery(KafkaError.MSG_SIZE_TOO_LARGE))
    assert isinstance(error, RequestNotSentError) and "r-1" in str(error)


def test_a_refusal_after_a_resend_of_a_request_the_engine_does_not_dedupe_is_no_answer(channel):
    refusal = Record(RecordType.COMMAND_REJECTION, "WORKFLOW", "REQUEST_CANCEL", {}, rejection_type="INVALID_STATE",
                     rejection_reason="cancellation was already requested")
    unknown = lambda m, d, u: RequestOutcomeUnknownError(m, intent="REQUEST_CANCEL", request_id="r-2",
                                                         delivered=d, may_land_until=u)
    one_copy = [(0.0, delivery())]
    assert channel._answered(refusal, one_copy, False, unknown, "REQUEST_CANCEL", "r-2") is refusal
    two_copies = [(0.0, delivery(KafkaError._MSG_TIMED_OUT)), (5.0, delivery())]
    with pytest.raises(RequestOutcomeUnknownError, match="an earlier copy may have been applied"):
        channel._answered(refusal, two_copies, False, unknown, "REQUEST_CANCEL", "r-2")
    assert channel._answered(refusal, two_copies, True, unknown, "START", "r-2") is refusal
