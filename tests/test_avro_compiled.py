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
from streamproc.protocol.records import JobIntent, JobStreamIntent, Record, RecordType, ValueType


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
    ("SCHEDULE", {"schedule_id": "s", "due_ms": 1_800_000_000_000}), ("ACTIVITY_TASK", {}), ("INCIDENT", {}),
    ("JOB_STREAM", {"queue": "q", "stream_id": "s", "credits": 4})])
def test_a_value_with_unset_fields_encodes_as_with_every_default_filled_in(value_type, value):
    record = Record.command(value_type, "X", value, key=5)
    assert codec.encode(record) == _fastavro_bytes(codec._to_avro_dict(record))


# Sparse values: the writers made per layout (`avro_layouts.py`) --------------------------------

def _schema_fields(name: str) -> list[dict]:
    return next(s for s in codec.SCHEMAS if s["name"] == name)["fields"]


_VALUE_SCHEMAS = {"JOB": ("job", "JobRecord"), "ACTIVITY_TASK": ("activity_task", "ActivityTaskRecord"),
                  "WORKFLOW": ("workflow", "WorkflowRecord"), "SCHEDULE": ("schedule", "ScheduleRecord"),
                  "JOB_STREAM": ("job_stream", "JobStreamRecord")}


def _full_value(value_type: str) -> dict:
    """A value of `value_type` with every field set, each to a generated value unlike its default."""
    field, schema = _VALUE_SCHEMAS[value_type]
    values = [d[field] for d in generate_many(codec.RECORD_SCHEMA, 2000) if d.get(field) is not None]
    return {f["name"]: next(v[f["name"]] for v in values if v[f["name"]] != f.get("default", object()))
            for f in _schema_fields(schema)}


_FULL_VALUES = {value_type: _full_value(value_type) for value_type in _VALUE_SCHEMAS}


def _assert_encodes_as_fastavro(value_type: str, value: dict, key: int = 5) -> None:
    record = Record.command(value_type, "X", value, key=key)
    expected = _fastavro_bytes(codec._to_avro_dict(record))
    assert codec.encode(record) == expected
    assert codec.encode(record) == expected  # the second time by the layout made the first time
    known = {f["name"] for f in _schema_fields(_VALUE_SCHEMAS[value_type][1])}
    assert codec.decode(expected).value == codec.with_defaults(value_type, {k: v for k, v in value.items() if k in known})


@pytest.mark.parametrize("value_type", sorted(_FULL_VALUES))
def test_sparse_values_with_fields_at_the_start_middle_end_all_or_none_match_fastavro(value_type):
    full = _FULL_VALUES[value_type]
    names = list(full)
    middle = len(names) // 2
    for kept in ([], names, names[:1], names[-1:], names[middle:middle + 1], names[:2] + names[-2:],
                 names[1:-1], names[::2], names[1::2], names[::5]):
        _assert_encodes_as_fastavro(value_type, {n: full[n] for n in kept})
        _assert_encodes_as_fastavro(value_type, {n: full[n] for n in reversed(kept)})  # another key order


@pytest.mark.parametrize("value_type", sorted(_FULL_VALUES))
def test_random_subsets_of_a_values_fields_match_fastavro(value_type):
    rng = random.Random(value_type)
    full = _FULL_VALUES[value_type]
    for _ in range(60):
        kept = [n for n in full if rng.random() < rng.choice((0.1, 0.3, 0.8))]
        rng.shuffle(kept)
        _assert_encodes_as_fastavro(value_type, {n: full[n] for n in kept})


def test_a_value_with_keys_the_schema_does_not_have_ignores_them_like_the_generic_writer():
    _assert_encodes_as_fastavro("WORKFLOW", {"extra": object(), "workflow_id": "w", "other": 1, "due_ms": 2**40})


def test_past_the_layout_cache_the_generic_writer_writes_the_same_bytes(monkeypatch):
    from streamproc.protocol import avro_layouts

    monkeypatch.setattr(avro_layouts, "LAYOUT_CACHE_SIZE", 2)
    encode, _ = compile_schemas(codec._schema_files(), "streamproc.Record")
    full = _FULL_VALUES["WORKFLOW"]
    for n in range(1, 12):
        record = Record.command("WORKFLOW", "X", dict(list(full.items())[:n]), key=5)
        assert encode(codec._to_avro_dict(record, value_defaults=False)) == _fastavro_bytes(codec._to_avro_dict(record))


def test_a_value_that_is_a_mapping_but_not_a_dict_is_written_by_the_generic_writer():
    from collections import OrderedDict

    _assert_encodes_as_fastavro("WORKFLOW", OrderedDict(workflow_id="w", attempt=3, due_ms=-(2**62)))


_LONGS = [0, -1, 63, -64, 64, -65, 2**31 - 1, -(2**31), 2**40, -(2**40) - 7, 1_800_000_000_000,
          4503599627370497, 2**62, 2**63 - 1, -(2**63)]


@pytest.mark.parametrize("n", _LONGS)
def test_large_and_negative_longs_in_every_long_field_match_fastavro_each_time(n):
    longs = [f["name"] for f in _schema_fields("WorkflowRecord") if f["type"] == "long"]
    for _ in range(2):  # the second time from the cache of encoded longs
        _assert_encodes_as_fastavro("WORKFLOW", {name: n for name in longs}, key=n)
        record = Record.command("JOB", "X", {"type": "t"}, key=n)
        record.source_position, record.timestamp_ms = n, n
        assert codec.encode(record) == _fastavro_bytes(codec._to_avro_dict(record))


@pytest.mark.parametrize("n", [2**31 - 1, -(2**31), 64, -65])
def test_int_fields_at_their_limits_match_fastavro(n):
    _assert_encodes_as_fastavro("WORKFLOW", {"attempt": n, "page": n, "pages": n})


def test_a_cached_long_does_not_let_a_float_or_an_int_past_its_range_through():
    codec.encode(Record.command("WORKFLOW", "X", {"due_ms": 2**40}, key=2**40))  # both cached now
    with pytest.raises(ValueError):
        codec.encode(Record.command("WORKFLOW", "X", {"due_ms": float(2**40)}, key=5))
    codec.encode(Record.command("WORKFLOW", "X", {"due_ms": 2**33}, key=5))
    with pytest.raises(ValueError):
        codec.encode(Record.command("WORKFLOW", "X", {"attempt": 2**33}, key=5))  # an int, not a long


@pytest.mark.parametrize("text", ["", "é", "wörkflow-流程-😀", "ü" * 40, "😀" * 100, "x" * 63, "x" * 64, "\x00"])
def test_unicode_strings_of_every_length_width_match_fastavro(text):
    _assert_encodes_as_fastavro("WORKFLOW", {"workflow_id": text, "input": text, "timer_id": text})
    record = Record.command("WORKFLOW", text or "X", {"run_id": text}, key=5, request_id=text)
    record.rejection_reason = text
    assert codec.encode(record) == _fastavro_bytes(codec._to_avro_dict(record))


# Review of the sparse readers and of decode() by position -----------------------------------

def test_a_run_of_defaulted_fields_reads_each_as_its_type_does_like_fastavro():
    # JSON's 0 is a valid default of a double: the run compared at once must still read 0.0
    schema = {"type": "record", "name": "T", "namespace": "t", "fields": [
        {"name": "d", "type": "double", "default": 0}, {"name": "n", "type": "long", "default": 0},
        {"name": "u", "type": ["double", "null"], "default": 1}, {"name": "s", "type": "string", "default": ""}]}
    encode, decode = compile_schemas([schema], "t.T")
    data = encode({})
    datum, end = decode(data)
    expected = fastavro.schemaless_reader(io.BytesIO(data), fastavro.parse_schema(schema))
    assert (datum, end) == (expected, len(data))
    assert [type(datum[name]) for name in "dnus"] == [float, int, float, str]


def test_a_record_type_that_RecordType_lacks_is_refused_at_import_not_left_to_escape_decode():
    record_schema = json.loads(json.dumps(codec.SCHEMAS[-1]))
    codec.check_record_schema(record_schema)
    record_schema["fields"][0]["type"]["symbols"].append("SNAPSHOT")
    with pytest.raises(RuntimeError, match="record types"):
        codec.check_record_schema(record_schema)
    swapped = json.loads(json.dumps(codec.SCHEMAS[-1]))
    swapped["fields"][3], swapped["fields"][4] = swapped["fields"][4], swapped["fields"][3]
    with pytest.raises(RuntimeError, match="fields"):
        codec.check_record_schema(swapped)


# Records written from kept parts (`protocol/record_parts.py`) ------------------------------

def test_records_written_from_kept_heads_and_middles_are_the_compiled_writers_bytes():
    # A command's records one after the other (the middle kept, the head changing), then
    # others: each written as the compiled writer writes it alone, and as fastavro does.
    value = {"workflow_id": "w", "run_id": "r", "event_id": 3, "attributes": "{}"}
    stamped = {"key": 2**52 + 1, "partition_id": 3, "source_position": 2**40, "timestamp_ms": 1_800_000_000_000,
               "request_id": "req"}
    records = [Record(RecordType.EVENT, ValueType.WORKFLOW, intent, value, **stamped)
               for intent in ("WORKFLOW_TASK_STARTED", "WORKFLOW_TASK_COMPLETED", "MARKER_RECORDED")]
    records += [Record(RecordType.EVENT, ValueType.WORKFLOW, "WORKFLOW_TASK", value, **stamped, reply_partition=1),
                Record(RecordType.COMMAND_REJECTION, ValueType.JOB, "Z" * 70, {"type": "t"}, key=-1,
                       rejection_type="INVALID_ARGUMENT", rejection_reason="é" * 70, reply_partition=3),
                Record(RecordType.EVENT, "UNKNOWN", "X", value, key=5),  # no value union of its own
                Record(RecordType.EVENT, ValueType.SCHEDULE, "X", None, key=5)]
    for record in records + records[::-1] + records:
        assert codec.encode(record) == _fastavro_bytes(codec._to_avro_dict(record)), record


def test_a_float_equal_to_a_kept_int_is_refused_as_the_compiled_writer_refuses_it():
    record = Record.command(ValueType.JOB, "CREATE", {"type": "t"}, key=2**40)
    codec.encode(record)  # its middle kept
    for field in ("key", "partition_id", "source_position", "timestamp_ms", "reply_partition"):
        twin = Record.command(ValueType.JOB, "CREATE", {"type": "t"}, key=2**40)
        setattr(twin, field, float(getattr(twin, field)))
        with pytest.raises(ValueError, match="does not fit"):
            codec.encode(twin)


def test_a_long_head_a_sender_wrote_is_written_but_not_kept():
    # A rejection repeats the value type and intent a command named, up to a command's size:
    # kept, distinct long ones would pin memory; written, they are still the writer's bytes.
    from streamproc.protocol.record_parts import HEAD_KEPT_MAX_BYTES
    parts = codec._PARTS
    for n in range(3):
        intent = f"{n}" + "I" * (HEAD_KEPT_MAX_BYTES * 4)
        record = Record(RecordType.COMMAND_REJECTION, ValueType.JOB, intent, {"type": "t"}, key=1,
                        rejection_type="INVALID_ARGUMENT", rejection_reason="unknown intent")
        assert codec.encode(record) == _fastavro_bytes(codec._to_avro_dict(record))
        assert all(head_of[2] != intent for head_of in parts._heads)
    short = Record(RecordType.EVENT, ValueType.JOB, "CREATED", {"type": "t"}, key=1)
    codec.encode(short)
    assert (RecordType.EVENT, ValueType.JOB, "CREATED") in parts._heads


# Job push (docs/proposals/job-push.md) ----------------------------------------------------

def test_a_job_stream_register_command_round_trips_with_its_defaults_filled_in():
    command = Record.command(ValueType.JOB_STREAM, JobStreamIntent.REGISTER,
                             {"queue": "payments", "stream_id": "a" * 32, "worker": "w-1", "credits": 8},
                             request_id="r-1", reply_partition=3)
    data = codec.encode(command)
    assert data == _fastavro_bytes(codec._to_avro_dict(command))
    decoded = codec.decode(data)
    assert (decoded.value_type, decoded.intent, decoded.key) == ("JOB_STREAM", "REGISTER", -1)
    assert (decoded.request_id, decoded.reply_partition) == ("r-1", 3)
    assert decoded.value == {"queue": "payments", "stream_id": "a" * 32, "worker": "w-1", "credits": 8,
                             "lease_ms": 15000, "lease_until_ms": -1, "in_use": 0}


def test_a_job_stream_command_may_be_sent_as_json_and_a_bad_field_is_refused():
    body = json.dumps({"value_type": "JOB_STREAM", "intent": "RENEW", "request_id": "r", "reply_partition": 0,
                       "job_stream": {"queue": "q", "stream_id": "s", "credits": 0, "lease_ms": 5000}}).encode()
    decoded = codec.decode(body, [(codec.CONTENT_TYPE_HEADER, codec.JSON_CONTENT_TYPE)])
    assert decoded.value == {"queue": "q", "stream_id": "s", "credits": 0, "lease_ms": 5000}
    bad = json.dumps({"value_type": "JOB_STREAM", "intent": "RENEW", "job_stream": {"credits": "many"}}).encode()
    with pytest.raises(codec.DecodeError, match="credits"):
        codec.decode(bad, [(codec.CONTENT_TYPE_HEADER, codec.JSON_CONTENT_TYPE)])


def test_a_pushed_job_started_record_round_trips():
    # What the engine writes to a stream's reply partition: request id <stream>/<key>/<attempt>.
    job = {"type": "payments", "payload": '{"amount": 5}', "retries": 3, "timeout_ms": 30_000, "attempt": 2,
           "worker": "w-1", "deadline_ms": 1_800_000_030_000}
    pushed = Record(RecordType.EVENT, ValueType.JOB, JobIntent.STARTED, job, key=2**51 + 7, partition_id=1,
                    source_position=12, timestamp_ms=1_800_000_000_000, request_id=f"{'a' * 32}/{2**51 + 7}/2",
                    reply_partition=3)
    data = codec.encode(pushed)
    assert data == _fastavro_bytes(codec._to_avro_dict(pushed))
    decoded = codec.decode(data)
    assert decoded.value == codec.with_defaults("JOB", job)
    assert (decoded.intent, decoded.key, decoded.request_id) == ("STARTED", 2**51 + 7, f"{'a' * 32}/{2**51 + 7}/2")
