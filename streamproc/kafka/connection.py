"""Does the cluster accept us? Checked once before a process starts its clients.

A client with wrong credentials or an untrusted certificate does not fail: librdkafka reports
the refusal as an error event and tries again, forever, like an absent broker. A process
would then wait on its topics with nothing said. Here a refusal (authentication, TLS) is a
`StartRefused` with the server's reason, within `timeout_s`; an absent broker is not (the
caller's own retries wait for it, so this returns as soon as it sees that).
"""

from __future__ import annotations

import threading
import time

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from streamproc.kafka.config import admin_config
from streamproc.kafka.errors import StartRefused

#: What a refusal looks like, and which settings it is about.
REFUSALS = {
    KafkaError._AUTHENTICATION: "sasl.username, sasl.password and sasl.mechanisms",
    KafkaError._SSL: "ssl.ca.location (the CA that signed the broker's certificate)",
}


class BrokerUnreachable(StartRefused):
    """No broker answered within the wait a command was given (`require_broker=True`)."""


def check_connection(bootstrap: str, timeout_s: float = 15.0, *, require_broker: bool = False) -> None:
    """Return once a broker answers; raise `StartRefused` if the cluster refuses us. An
    absent broker: return at once (the caller's clients wait for it), or with
    `require_broker` wait for one up to `timeout_s` and then raise `BrokerUnreachable`
    (a command from a shell, which should not hang on a typo in the address)."""
    refused: list[KafkaError] = []
    unreachable: list[KafkaError] = []

    def on_error(error: KafkaError) -> None:
        (refused if error.code() in REFUSALS else unreachable).append(error)

    # Its own log lines say what on_error reports, once per retry: kept quiet.
    try:
        admin = AdminClient(admin_config(bootstrap, error_cb=on_error, log_level=0))
    except KafkaException as exc:  # a property librdkafka does not know, or a value it refuses
        raise StartRefused(f"Kafka client settings refused: {exc.args[0].str()}") from None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if admin.list_topics(timeout=min(1.0, max(deadline - time.monotonic(), 0.1))).brokers:
                return
        except KafkaException:
            pass
        admin.poll(0.1)  # serves error_cb
        if refused:
            error = refused[0]
            raise StartRefused(f"Kafka at {bootstrap} refused the connection: {error.str()} "
                               f"; check {REFUSALS[error.code()]}")
        if unreachable and not require_broker:  # no broker there (yet): the caller waits for it
            return
    if require_broker:
        raise BrokerUnreachable(f"no Kafka broker answers at {bootstrap} (waited {timeout_s:g} s): start one "
                                f"(`streamproc broker start`, `streamproc dev`) or name another with "
                                f"--bootstrap or STREAMPROC_BOOTSTRAP")


def broker_answers(bootstrap: str, timeout_s: float = 2.0) -> bool:
    """Whether a broker answers a metadata request of a new client within `timeout_s`: asked
    by the engine's watchdog, whose question is whether the broker or the engine's own
    clients are stuck (a new client has no connection left over from before)."""
    admin = AdminClient(admin_config(bootstrap, error_cb=lambda error: None, log_level=0))
    try:
        return bool(admin.list_topics(timeout=timeout_s).brokers)
    except KafkaException:
        return False


class BrokerProbe:
    """`broker_answers` on a thread of its own, waited for at most `wait_s`: the watchdog that
    asks is the engine's last resort, and must not hang in a client (closing one is a
    blocking call). One probe at a time: while one is still out, the answer is no."""

    def __init__(self, bootstrap: str, wait_s: float = 5.0) -> None:
        self.bootstrap = bootstrap
        self.wait_s = wait_s
        self._out: threading.Thread | None = None

    def __call__(self) -> bool:
        if self._out is not None and self._out.is_alive():
            return False
        answer: list[bool] = []
        self._out = threading.Thread(target=lambda: answer.append(broker_answers(self.bootstrap)),
                                     name="broker-probe", daemon=True)
        self._out.start()
        self._out.join(self.wait_s)
        return bool(answer and answer[0])
