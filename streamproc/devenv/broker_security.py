"""An extra SASL_SSL listener for the local broker: TLS, and SCRAM-SHA-512 logins.

What a secured production cluster (Confluent Cloud, MSK, Aiven, Strimzi) asks of a client,
on the developer's machine, to try and test ``STREAMPROC_KAFKA_*`` settings against:

    listener = SaslSslListener(port=29094, certificate_chain=cert_pem, private_key=key_pem,
                               username="alice", password="alice-secret")
    LocalBroker(port=29092, sasl_ssl=listener).start()

The PLAINTEXT listener stays (the broker's own probes and inter-broker traffic use it). The
certificate and its key are PEM text (the key unencrypted PKCS#8, "BEGIN PRIVATE KEY"), put in
``server.properties`` inline (Kafka's PEM keystore type). The SCRAM user is written into the
metadata when the storage is formatted (``kafka-storage format --add-scram``), so on the first
start of a state directory only: a broker formatted before keeps the users it had.
"""

from __future__ import annotations

import dataclasses

from streamproc.devenv.broker_errors import BrokerError
from streamproc.devenv.broker_settings import HOST

LISTENER = "SASL_SSL"
MECHANISM = "SCRAM-SHA-512"
_PREFIX = f"listener.name.{LISTENER.lower()}."


@dataclasses.dataclass(frozen=True, slots=True)
class SaslSslListener:
    port: int
    #: PEM: the server's certificate (with its chain); its names must match 127.0.0.1.
    certificate_chain: str
    #: PEM, unencrypted PKCS#8.
    private_key: str
    username: str
    password: str

    def __post_init__(self) -> None:
        if "BEGIN PRIVATE KEY" not in self.private_key:
            raise BrokerError("the SASL_SSL listener's key must be unencrypted PKCS#8 PEM "
                              "(-----BEGIN PRIVATE KEY-----)")
        for what, value in (("user name", self.username), ("password", self.password)):
            if not value or any(ch in value for ch in ",=[]\"' "):
                raise BrokerError(f"SCRAM {what} {value!r}: must be non-empty, without , = [ ] quotes or spaces")

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    def add_to(self, props: dict[str, str]) -> dict[str, str]:
        """``props`` (the broker's server.properties) with this listener added."""
        out = dict(props)
        out["listeners"] += f",{LISTENER}://{HOST}:{self.port}"
        out["advertised.listeners"] += f",{LISTENER}://{HOST}:{self.port}"
        out["listener.security.protocol.map"] += f",{LISTENER}:{LISTENER}"
        out.update({
            "sasl.enabled.mechanisms": MECHANISM,
            f"{_PREFIX}sasl.enabled.mechanisms": MECHANISM,
            f"{_PREFIX}{MECHANISM.lower()}.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            f"{_PREFIX}ssl.keystore.type": "PEM",
            f"{_PREFIX}ssl.keystore.certificate.chain": self.certificate_chain.strip(),
            f"{_PREFIX}ssl.keystore.key": self.private_key.strip(),
        })
        return out

    def format_arguments(self) -> list[str]:
        """What ``kafka-storage format`` needs to create the SCRAM user."""
        return ["--add-scram", f"{MECHANISM}=[name={self.username},password={self.password}]"]

    def client_properties(self, ca_location: str) -> dict[str, str]:
        """The librdkafka properties of a client of this listener (``ca_location``: the CA's PEM file)."""
        return {"bootstrap.servers": self.bootstrap, "security.protocol": LISTENER, "sasl.mechanisms": MECHANISM,
                "sasl.username": self.username, "sasl.password": self.password, "ssl.ca.location": ca_location}
