"""The compiled Avro codec writes and reads exactly what fastavro does, and refuses bad data."""

from __future__ import annotations

import io
import json
import random

import fastavro
import pytest
from fastavro.utils import generate_many

from streamproc.protocol import codec
from streamproc.protocol.avro_compiled import compile_schemas
from streamproc.protocol.records import Record, ValueType


def _fastavro_bytes(datum: dict) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, codec.RECORD_SCHEMA, datum)
    return buf.getvalue()


def test_random_records_encode_to_fastavros_bytes_and_decode_to_its_values():
    encode, decode = compile_schemas(codec._schema_files(), "streamproc.Record")
    for datum in generate_many(codec.RECORD_SCHEMA, 1500):
        expected = _fastavro_bytes(datum)
        assert encode(datum) == expected
        assert decode(expected) == (fastavro.schemaless_reader(io.BytesIO(expected), codec.RECORD_SCHEMA),
                                    len(expected))


@pytest.mark.parametrize("key", [-1, 0, 63, -64, 64, -65, 8191, -8192, 2**31, 2**63 - 1, -(2**63)])
def test_integers_at_every_varint_width_match_fastavro(key):
    record = Record.command(ValueType.JOB, "CREATE", {"type": "t", "retries": 3}, key=key)
    data = codec.encode(record)
    assert data == _fastavro_bytes(codec._to_avro_dict(record))
    assert codec.decode(data).key == key


@pytest.mark.parametrize("key, value", [
    (2**63, {"type": "t"}),                  # past a long
    ("7", {"type": "t"}),                    # not a number
    (1, {"type": 5}),                        # a string field given a number
    (1, {"type": "t", "retries": 2**31}),   # past an int
    (1, {"type": "t", "retries": None}),    # a required int given null
])
def test_values_that_do_not_fit_the_schema_are_refused(key, value):
    record = Record.command(ValueType.JOB, "CREATE", value, key=1)
    record.key = key
    with pytest.raises((TypeError, ValueError, AttributeError)):
        codec.encode(record)


def test_garbage_and_truncated_records_are_decode_errors_never_other_exceptions():
    rng = random.Random(7)
    valid = codec.encode(Record.command(ValueType.WORKFLOW, "START", {"workflow_id": "w", "input": "[1]"}, key=9))
    for _ in range(5000):
        noise = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 40)))
        data = valid[:rng.randint(0, len(valid))] + noise if rng.random() < 0.5 else noise
        try:
            codec.decode(data)
        except codec.DecodeError:
            pass
    with pytest.raises(codec.DecodeError, match="trailing bytes"):
        codec.decode(valid + b"\x00")
    with pytest.raises(codec.DecodeError, match="ends early"):
        codec.decode(valid[:-3])


def test_types_it_does_not_compile_are_refused_when_compiling():
    schema = {"type": "record", "name": "M", "fields": [{"name": "m", "type": {"type": "map", "values": "long"}}]}
    with pytest.raises(NotImplementedError, match="map"):
        compile_schemas([schema], "M")
    json.dumps(schema)  # the schema itself is valid Avro: the refusal is ours


@pytest.mark.parametrize("value_type, value", [
    ("JOB", {"type": "t"}), ("WORKFLOW", {"workflow_id": "w", "attributes": "{}"}),
    ("SCHEDULE", {"schedule_id": "s", "due_ms": 1_800_000_000_000}), ("ACTIVITY_TASK", {}), ("INCIDENT", {})])
def test_a_value_with_unset_fields_encodes_as_with_every_default_filled_in(value_type, value):
    record = Record.command(value_type, "X", value, key=5)
    assert codec.encode(record) == _fastavro_bytes(codec._to_avro_dict(record))
