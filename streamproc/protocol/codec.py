"""Avro (binary, schemaless) encoding of `Record`, with the schemas from `schemas/`.

Every value on our topics is one Avro-encoded `streamproc.Record`; its writer schema is
named by the `content-type` header so that any Kafka client can decode it with the
schema files. Commands may also be sent as JSON (header `content-type:
application/json`) by clients that have no Avro library; the engine answers in Avro.
With a Schema Registry configured, events carry the registry's 5-byte frame before the
Avro body (`registry_framing.py`), and a content type that says so.
"""

from __future__ import annotations

import dataclasses
import json
from importlib import resources
from typing import Any

import fastavro
import fastavro.validation
import orjson

from streamproc.protocol.avro_compiled import compile_codec
from streamproc.protocol.record_parts import RecordParts
from streamproc.protocol.registry_framing import FRAMED_CONTENT_TYPE, unframe
from streamproc.protocol.records import Record, RecordType

AVRO_CONTENT_TYPE = b"application/vnd.streamproc.record.v1+avro"
JSON_CONTENT_TYPE = b"application/json"
CONTENT_TYPE_HEADER = "content-type"

#: Which Record field holds the value of each value type.
VALUE_FIELDS = {"JOB": "job", "INCIDENT": "incident", "ACTIVITY_TASK": "activity_task",
                "WORKFLOW": "workflow", "SCHEDULE": "schedule", "JOB_STREAM": "job_stream"}
#: Schema files in dependency order (a schema after the ones it names).
SCHEMA_FILES = ("JobRecord", "IncidentRecord", "FailureRecord", "RetryPolicyRecord",
                "ActivityTaskRecord", "WorkflowRecord", "ScheduleRecord", "JobStreamRecord", "Record")


class DecodeError(ValueError):
    """The bytes are not a streamproc record. `request_id` and `reply_partition`: the caller's,
    when they could be read, so that the rejection still reaches whoever waits for it."""

    def __init__(self, reason: str, request_id: str | None = None, reply_partition: int = -1) -> None:
        super().__init__(reason)
        self.request_id = request_id
        self.reply_partition = reply_partition


#: How much of a value a rejection reason quotes.
EXCERPT_CHARS = 40
#: The content types a command may have; none at all means Avro. (Events may also be framed.)
CONTENT_TYPES = (AVRO_CONTENT_TYPE, JSON_CONTENT_TYPE)


def excerpt(value: bytes | str) -> str:
    """The start of `value` for a message: at most EXCERPT_CHARS characters, quoted."""
    text = value.decode("utf-8", errors="replace") if isinstance(value, bytes) else value
    return repr(text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + "...")


def clipped(text: str) -> str:
    """`text` itself when short, else its first EXCERPT_CHARS characters and "...": for names
    a rejection repeats (a value type, an intent), which may be anything a sender wrote."""
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + "..."


def _schema_files() -> list[dict]:
    folder = resources.files("streamproc.protocol") / "schemas"
    return [json.loads((folder / f"{name}.avsc").read_text(encoding="utf-8")) for name in SCHEMA_FILES]


def _parse(schemas: list[dict]) -> dict:
    named: dict = {}
    for schema in schemas:
        parsed = fastavro.parse_schema(schema, named_schemas=named)
    return parsed


#: The schema files as JSON, in SCHEMA_FILES order.
SCHEMAS = _schema_files()
#: fastavro's parsed schema: validates JSON commands, and is what the compiled codec is
#: tested against.
RECORD_SCHEMA = _parse(SCHEMAS)
_COMPILED = compile_codec(SCHEMAS, "streamproc.Record")
_write_fields, _read_fields = _COMPILED.write_fields, _COMPILED.read_fields


def _value_defaults(schema_name: str) -> dict[str, Any]:
    folder = resources.files("streamproc.protocol") / "schemas"
    fields = json.loads((folder / f"{schema_name}.avsc").read_text(encoding="utf-8"))["fields"]
    return {f["name"]: f["default"] for f in fields}


VALUE_DEFAULTS = {"JOB": _value_defaults("JobRecord"), "INCIDENT": _value_defaults("IncidentRecord"),
                  "ACTIVITY_TASK": _value_defaults("ActivityTaskRecord"),
                  "WORKFLOW": _value_defaults("WorkflowRecord"),
                  "SCHEDULE": _value_defaults("ScheduleRecord"),
                  "JOB_STREAM": _value_defaults("JobStreamRecord")}


def with_defaults(value_type: str, value: dict[str, Any] | None) -> dict[str, Any]:
    """The value with every schema field present, so processors can index it freely."""
    defaults = VALUE_DEFAULTS.get(value_type)
    if defaults is None:
        return dict(value or {})
    merged = dict(defaults)
    if value:
        merged.update(value)
    return merged


def _to_avro_dict(record: Record, value_defaults: bool = True) -> dict[str, Any]:
    """The Avro datum of `record`; `value_defaults=False` leaves the value's unset fields
    out (the compiled writer writes their defaults itself, without a merged copy)."""
    out = {
        "record_type": record.record_type.value,
        "value_type": record.value_type,
        "intent": record.intent,
        "key": record.key,
        "partition_id": record.partition_id,
        "source_position": record.source_position,
        "timestamp_ms": record.timestamp_ms,
        "request_id": record.request_id,
        "rejection_type": record.rejection_type,
        "rejection_reason": record.rejection_reason,
        "reply_partition": record.reply_partition,
        "job": None,
        "incident": None,
        "activity_task": None,
        "workflow": None,
        "schedule": None,
        "job_stream": None,
    }
    field = VALUE_FIELDS.get(record.value_type)
    if field is not None and record.value is not None:
        out[field] = with_defaults(record.value_type, record.value) if value_defaults else record.value
    return out


#: The fields `encode` passes before the value fields, in the schema's order.
_HEADER_FIELDS = ("record_type", "value_type", "intent", "key", "partition_id", "source_position", "timestamp_ms",
                  "request_id", "rejection_type", "rejection_reason", "reply_partition")


def check_record_schema(record_schema: dict) -> None:
    """Raises RuntimeError (at import) if Record.avsc and the Record class no longer fit how
    encode() and decode() pass fields by position."""
    fields = [f["name"] for f in record_schema["fields"]]
    if fields[:len(_HEADER_FIELDS)] != list(_HEADER_FIELDS) or sorted(fields[len(_HEADER_FIELDS):]) != sorted(
            VALUE_FIELDS.values()):
        raise RuntimeError(f"Record.avsc's fields are not the ones encode() writes: {fields}")
    # decode() gives Record its fields by position: the header's, with the value after the intent.
    if [f.name for f in dataclasses.fields(Record)][:len(_HEADER_FIELDS) + 1] != [*_HEADER_FIELDS[:3], "value",
                                                                                  *_HEADER_FIELDS[3:]]:
        raise RuntimeError("Record's fields are not in the order decode() gives them")
    # decode() looks the record type's symbol up in RecordType: one it lacks would escape
    # decode() as a KeyError, not a DecodeError, and stop the partition at that record.
    record_type = record_schema["fields"][0]["type"]
    symbols = record_type.get("symbols") if isinstance(record_type, dict) else record_type
    if not isinstance(symbols, list) or sorted(symbols) != sorted(t.value for t in RecordType):
        raise RuntimeError(f"Record.avsc's record types {symbols} are not RecordType's")
    # encode() writes a value's union as RecordParts does: null first, then one record.
    for field in record_schema["fields"][len(_HEADER_FIELDS):]:
        _union_record(field["type"])


def _union_record(union: object) -> str:
    """The full name of the record in a value's union ["null", record]."""
    if not (isinstance(union, list) and len(union) == 2 and union[0] == "null" and isinstance(union[1], str)):
        raise RuntimeError(f"Record.avsc's value unions must be [\"null\", a record], got {union}")
    return union[1] if "." in union[1] else f"streamproc.{union[1]}"


check_record_schema(SCHEMAS[-1])
_RECORD_FIELDS = [f["name"] for f in SCHEMAS[-1]["fields"]]
#: Where Record's value fields start among its fields.
_VALUE_AT = len(_HEADER_FIELDS)
_RECORD_TYPES = {t.value: t for t in RecordType}
#: The position of each value type's field among Record's value fields.
_VALUE_SLOTS = {value_type: _RECORD_FIELDS.index(field) - len(_HEADER_FIELDS) for value_type, field in VALUE_FIELDS.items()}
_PARTS = RecordParts(_write_fields, [_COMPILED.writers[_union_record(f["type"])]
                                     for f in SCHEMAS[-1]["fields"][len(_HEADER_FIELDS):]], _VALUE_SLOTS)


def encode(record: Record) -> bytes:
    # The fields straight from the record, not through an Avro datum dict (`_to_avro_dict`):
    # the value's unset fields are left out, the compiled writer writes their defaults. The
    # head and middle fields repeat from record to record: their bytes are kept (`_PARTS`).
    try:
        return _PARTS.encode(record)
    except (TypeError, ValueError, AttributeError, KeyError) as exc:
        # The compiled writer does not say which field was wrong; fastavro's validation does.
        try:
            fastavro.validation.validate(_to_avro_dict(record), RECORD_SCHEMA, raise_errors=True)
        except fastavro.validation.ValidationError as explained:
            raise ValueError(f"record does not fit streamproc.Record: {schema_mismatch(explained)}") from None
        raise ValueError(f"record does not fit streamproc.Record: {type(exc).__name__}: {exc}") from None


def _from_dict(d: dict[str, Any]) -> Record:
    value_type = d["value_type"]
    field = VALUE_FIELDS.get(value_type)
    return Record(
        record_type=RecordType(d["record_type"]),
        value_type=value_type,
        intent=d["intent"],
        value=d.get(field) if field else None,
        key=d.get("key", -1),
        partition_id=d.get("partition_id", -1),
        source_position=d.get("source_position", -1),
        timestamp_ms=d.get("timestamp_ms", 0),
        request_id=d.get("request_id"),
        rejection_type=d.get("rejection_type"),
        rejection_reason=d.get("rejection_reason"),
        reply_partition=d.get("reply_partition", -1),
    )


def decode(data: bytes | None, headers: list[tuple[str, bytes]] | None = None) -> Record:
    """Decode a record; raises `DecodeError` with the reason when it is not one."""
    if not data:
        raise DecodeError("empty record value")
    content_type = header(headers, CONTENT_TYPE_HEADER)
    if content_type == JSON_CONTENT_TYPE:
        return _decode_json(data)
    if content_type == FRAMED_CONTENT_TYPE:
        try:
            data = unframe(data)[1]  # whatever the schema id, the body is a streamproc.Record
        except ValueError as exc:
            raise DecodeError(str(exc)) from None
    elif content_type is not None and content_type not in CONTENT_TYPES:
        raise DecodeError(f"unknown content-type {excerpt(content_type)}: expected "
                          f"{' or '.join(t.decode() for t in CONTENT_TYPES)}")
    try:
        fields, end = _read_fields(data, 0)
    except IndexError:
        raise DecodeError(f"not an Avro streamproc.Record: it ends early ({len(data)} bytes)") from None
    except Exception as exc:  # garbage fails in many ways: bad lengths, UTF-8, branches
        raise DecodeError(f"not an Avro streamproc.Record: {type(exc).__name__}: {exc}") from None
    if end != len(data):
        raise DecodeError(f"{len(data) - end} trailing bytes after the Avro record")
    value_slot = _VALUE_SLOTS.get(fields[1])
    return Record(_RECORD_TYPES[fields[0]], *fields[1:3], None if value_slot is None else fields[_VALUE_AT + value_slot],
                  *fields[3:_VALUE_AT])


#: Duration fields that JSON commands may also give as SWF strings ("NONE" or seconds).
_SWF_DURATION_FIELDS = ("schedule_to_close_timeout_ms", "schedule_to_start_timeout_ms",
                        "start_to_close_timeout_ms", "heartbeat_timeout_ms")


def _swf_durations(value: dict[str, Any]) -> None:
    from streamproc.semantics.swf import parse_swf_timeout

    for name in _SWF_DURATION_FIELDS:
        if isinstance(value.get(name), str):
            try:
                parsed = parse_swf_timeout(value[name], field=name)
            except ValueError as exc:
                raise DecodeError(str(exc)) from None
            value[name] = 0 if parsed is None else int(parsed.total_seconds() * 1000)


def _decode_json(data: bytes) -> Record:
    try:
        d = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise DecodeError(f"invalid JSON: {exc}") from None
    if not isinstance(d, dict):
        raise DecodeError("a JSON command must be an object")
    try:
        return _json_record(d)
    except DecodeError as exc:
        exc.request_id, exc.reply_partition = _caller(d)
        raise


def _caller(d: dict[str, Any]) -> tuple[str | None, int]:
    """The request id and reply partition of a command that is not a valid one, if readable."""
    request_id = d.get("request_id")
    reply_partition = d.get("reply_partition")
    return (request_id if isinstance(request_id, str) else None,
            reply_partition if type(reply_partition) is int and 0 <= reply_partition < 2**31 else -1)


def _json_record(d: dict[str, Any]) -> Record:
    d.setdefault("record_type", "COMMAND")
    for required in ("value_type", "intent"):
        if not isinstance(d.get(required), str):
            raise DecodeError(f"a JSON command needs a string field {required!r}")
    field = VALUE_FIELDS.get(d["value_type"])
    if field and d.get(field) is not None:
        if not isinstance(d[field], dict):
            raise DecodeError(f"field {field!r} must be an object")
        _swf_durations(d[field])
    try:
        record = _from_dict(d)
    except ValueError as exc:
        raise DecodeError(str(exc)) from None
    # Whatever the engine repeats of a JSON command (in events or a rejection) must be
    # encodable in Avro, so the command must fit the schema now.
    try:
        fastavro.validation.validate(_to_avro_dict(record), RECORD_SCHEMA, raise_errors=True)
    except fastavro.validation.ValidationError as exc:
        raise DecodeError(f"JSON command does not match schema streamproc.Record: {schema_mismatch(exc)}") from None
    return record


def schema_mismatch(error: fastavro.validation.ValidationError, most: int = 3) -> str:
    """Which fields do not fit, each value quoted as an excerpt: fastavro's own message
    repeats every value whole (a megabyte payload, in a rejection reason)."""
    found = list(getattr(error, "errors", ()))
    # A union's other branches are reported too ("job is <{...}> expected null"): the
    # fields inside say what is wrong, where there are any.
    leaves = [e for e in found if not isinstance(e.datum, (dict, list))] or found
    parts = [f"{e.field} is {excerpt(e.datum if isinstance(e.datum, str) else repr(e.datum))} ({type(e.datum).__name__}), expected "
             f"{excerpt(e.schema if isinstance(e.schema, str) else orjson.dumps(e.schema))}" for e in leaves[:most]]
    if len(leaves) > most:
        parts.append(f"and {len(leaves) - most} more")
    return "; ".join(parts) or excerpt(str(error))


def header(headers: list[tuple[str, bytes]] | None, name: str) -> bytes | None:
    for k, v in headers or ():
        if k == name:
            return v
    return None


AVRO_HEADERS = [(CONTENT_TYPE_HEADER, AVRO_CONTENT_TYPE)]

#: Marks a command the engine processed in the same transaction that wrote it (a due-date
#: checker's TIME_OUT, say): it is on the log for the record, and skipped when consumed.
PROCESSED_HEADER = "streamproc-processed"
PROCESSED_HEADERS = [*AVRO_HEADERS, (PROCESSED_HEADER, b"1")]
#: Marks a command an engine wrote through the log for a partition it owns (`engine/relay.py`),
#: with the engine's relay session: until it reads them back, it relays nothing to that partition.
RELAY_HEADER = "streamproc-relay"
