"""The events topic in the Schema Registry wire format, for ksqlDB, Connect, Flink and friends.

With `STREAMPROC_SCHEMA_REGISTRY_URL` set, the engine registers the `streamproc.Record` schema
at start under the subject `<events topic>-value` (the topic-name strategy, the default of
Confluent's serializers, ksqlDB and Connect), and writes each event as magic byte 0, the
schema id, then the Avro body. The id is found once, here: the hot path only puts 5 bytes
before bytes it has already encoded. Without the URL, events stay as they were (plain Avro,
`content-type` header).

Registered once: an engine first looks the schema up and registers it only when the subject
lacks it, so restarts and other engines add no version. A new subject gets compatibility
BACKWARD (readers with the new schema read old events), set before its first version; a
subject that already exists keeps whatever level its operator chose.

Uses `confluent_kafka.schema_registry` (the `schema-registry` extra of this package).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import structlog

from streamproc.export.event_schema import record_schema_text
from streamproc.kafka.errors import StartRefused
from streamproc.protocol.codec import AVRO_HEADERS, CONTENT_TYPE_HEADER
from streamproc.protocol.registry_framing import FRAMED_CONTENT_TYPE, frame_prefix

log = structlog.get_logger("streamproc.export")

COMPATIBILITY = "BACKWARD"
#: How long an engine start waits for a registry that does not answer.
REGISTRY_WAIT_S = 30.0
_NOT_FOUND = 404


@dataclass(frozen=True)
class EventFraming:
    """What goes before each event's Avro body, and the headers it is written with."""

    prefix: bytes = b""
    headers: list = field(default_factory=lambda: list(AVRO_HEADERS))
    schema_id: int | None = None


def subject_name(events_topic: str) -> str:
    return f"{events_topic}-value"


def event_framing(url: str, events_topic: str, wait_s: float = REGISTRY_WAIT_S) -> EventFraming:
    """Plain events without a `url`; else the registry's frame with the registered schema's id.
    Raises StartRefused (one line) when the registry refuses the schema or does not answer."""
    if not url:
        return EventFraming()
    subject = subject_name(events_topic)
    schema_id = register_events_schema(url, subject, wait_s)
    log.info("events_schema_registered", subject=subject, schema_id=schema_id, registry=url)
    return EventFraming(frame_prefix(schema_id), [(CONTENT_TYPE_HEADER, FRAMED_CONTENT_TYPE)], schema_id)


def register_events_schema(url: str, subject: str, wait_s: float = REGISTRY_WAIT_S) -> int:
    """The id of `streamproc.Record` under `subject`, registered if the subject lacks it."""
    try:
        from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
        from confluent_kafka.schema_registry.error import SchemaRegistryError
    except ImportError as exc:
        raise StartRefused(f"STREAMPROC_SCHEMA_REGISTRY_URL is set, but the registry client does not import "
                           f"({exc}): pip install 'streamproc[schema-registry]'") from None
    client = SchemaRegistryClient({"url": url})
    schema = Schema(record_schema_text(), "AVRO")
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return _lookup_or_register(client, subject, schema, SchemaRegistryError)
        except SchemaRegistryError as exc:
            raise StartRefused(f"schema registry {url} refused the events schema for subject {subject!r}: "
                               f"{exc}") from None
        except Exception as exc:  # noqa: BLE001 - the HTTP client's transport errors: not answering yet
            if time.monotonic() >= deadline:
                raise StartRefused(f"schema registry {url} did not answer within {wait_s:.0f} s: "
                                   f"{type(exc).__name__}: {exc}") from None
            log.warning("schema_registry_unavailable", registry=url, error=f"{type(exc).__name__}: {exc}")
            time.sleep(1.0)


def _lookup_or_register(client, subject: str, schema, registry_error: type[Exception]) -> int:
    try:
        return client.lookup_schema(subject, schema).schema_id
    except registry_error as exc:
        if exc.http_status_code != _NOT_FOUND:
            raise
    try:
        versions = client.get_versions(subject)
    except registry_error as exc:
        if exc.http_status_code != _NOT_FOUND:
            raise
        versions = []
    if not versions:
        client.set_compatibility(subject, COMPATIBILITY)
    return client.register_schema(subject, schema)
