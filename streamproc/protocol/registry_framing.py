"""The Schema Registry wire format of a record: magic byte 0, the schema id (4 bytes, big
endian), then the Avro body, as Confluent's serializers write it and ksqlDB, Kafka Connect,
Flink's `avro-confluent` and `AvroDeserializer` read it.

The engine frames the records of the events topic this way when a registry is configured
(`streamproc/export/schema_registry.py`) and marks them with their own content type, so our
readers know to strip the frame: the first byte alone cannot tell, since a plain `Record`
starts with its `record_type` enum index, which is 0 for COMMAND.
"""

from __future__ import annotations

import struct

MAGIC_BYTE = 0
FRAME_BYTES = 5
#: The content type of a framed record (the body is a `streamproc.Record` all the same).
FRAMED_CONTENT_TYPE = b"application/vnd.streamproc.record.v1+avro; framing=schema-registry"

_FRAME = struct.Struct(">bI")


def frame_prefix(schema_id: int) -> bytes:
    """What goes before each Avro body written with schema `schema_id`."""
    if not 0 <= schema_id < 2**31:
        raise ValueError(f"a schema id must be in [0, 2^31), got {schema_id}")
    return _FRAME.pack(MAGIC_BYTE, schema_id)


def unframe(data: bytes) -> tuple[int, bytes]:
    """(schema id, Avro body) of a framed record; ValueError when it is not one."""
    if len(data) < FRAME_BYTES:
        raise ValueError(f"a schema-registry record needs {FRAME_BYTES} header bytes, got {len(data)}")
    magic, schema_id = _FRAME.unpack_from(data)
    if magic != MAGIC_BYTE:
        raise ValueError(f"a schema-registry record starts with magic byte 0, got {magic}")
    return schema_id, data[FRAME_BYTES:]
