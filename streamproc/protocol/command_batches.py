"""Command batches: many commands of one value type and intent, for one partition, in one record.

A burst of schedule actions is thousands of small commands: the checker's TRIGGERs of a
partition and the STARTs they send to each workflow's partition. Each command on its own
costs an Avro encoding, a produce, a consume and a decoding; packed, a burst costs one of
each per partition and transaction. A batch is a command like any other, on the commands
topic, processed where it lands: its value type is its commands', its intent `BATCH`,
its routing field (`workflow_id`, `schedule_id`) the first command's (every command of a
batch goes to the same partition), and its `attributes` the JSON

    {"intent": "START", "parts": [{"value": {...}, "request_id": "...", "key": 7}, ...]}

(`request_id` and `key` only when set). The partition processor processes each part as
the command it is, at the batch's position, one after the other: each is accepted or
rejected on its own (a part that fails leaves the others), each part of a replayed batch
is checked again as a replayed command would be. A client may send batches too.

The engine processes at most `max_batch` commands from the log between two commits,
counting a batch's parts: a poll of batches is taken in steps, the rest read again.

What is packed: the commands in `PACKED`, when several for one partition follow one
another in a transaction's output; a command is never moved past another one for the
same partition, so the order of a partition's commands stays as written.
"""

from __future__ import annotations

from collections.abc import Iterable

import orjson

from streamproc.protocol.partitioning import ROUTING_FIELDS
from streamproc.protocol.records import COMMAND, Record, RecordType, ScheduleIntent, ValueType, WorkflowIntent

BATCH = "BATCH"
#: The commands packed: the checker's wake-ups of schedules, the starts they send, and
#: what the workflows' partitions answer (a start refused, a workflow closed).
PACKED = frozenset({(ValueType.SCHEDULE, ScheduleIntent.TRIGGER), (ValueType.WORKFLOW, WorkflowIntent.START),
                    (ValueType.SCHEDULE, ScheduleIntent.WORKFLOW_START_FAILED),
                    (ValueType.SCHEDULE, ScheduleIntent.WORKFLOW_CLOSED)})
#: A batch's parts add up to at most this many bytes (far below the command size limit);
#: a part larger than MAX_PART_BYTES travels alone, as the command it is.
MAX_BATCH_BYTES = 256 * 1024
MAX_PART_BYTES = 64 * 1024
#: And hold at most this many commands: the engine processes a bounded number of commands
#: between two commits, counting a batch's parts (each may write a dozen records).
MAX_BATCH_PARTS = 1000


def commands_in(record: Record) -> tuple[Record, ...] | list[Record]:
    """The commands a processed record stands for: a BATCH's parts, else the record itself."""
    return record.parts or (record,)


class BatchError(ValueError):
    """A BATCH command whose parts cannot be read; the reason says what is wrong."""


def is_batch(record: Record) -> bool:
    return record.intent == BATCH and record.record_type is COMMAND


def packable(record: Record) -> bool:
    return (record.value_type, record.intent) in PACKED and record.record_type is COMMAND


def part_of(record: Record) -> bytes | None:
    """The record's part JSON (kept on the record), or None when it travels alone: too
    large, or a value JSON cannot hold."""
    if record.packed is None:
        part: dict = {"value": record.value}
        if record.request_id is not None:
            part["request_id"] = record.request_id
        if record.key >= 0:
            part["key"] = record.key
        try:
            packed = orjson.dumps(part)
        except TypeError:
            return None
        if len(packed) > MAX_PART_BYTES:
            return None
        record.packed = packed
    return record.packed


def pack(records: Iterable[tuple[int, Record]]) -> list[tuple[int, Record]]:
    """`(partition, command)` in output order, with the packable commands that follow one
    another for a partition (no other command for it between them) in BATCH commands."""
    out: list[tuple[int, Record] | None] = []
    groups: list[tuple[int, int, list[Record]]] = []  # (index in out, partition, parts)
    open_group: dict[int, tuple[int, list[Record], int]] = {}  # partition -> (group, parts, bytes)
    for partition, record in records:
        part = part_of(record) if packable(record) else None
        current = open_group.get(partition)
        if part is None:
            open_group.pop(partition, None)
            out.append((partition, record))
            continue
        if current is not None:
            group, parts, size = current
            first = parts[0]
            if (first.value_type, first.intent) == (record.value_type, record.intent) \
                    and size + len(part) <= MAX_BATCH_BYTES and len(parts) < MAX_BATCH_PARTS:
                parts.append(record)
                open_group[partition] = (group, parts, size + len(part))
                continue
        parts = [record]
        open_group[partition] = (len(groups), parts, len(part))
        groups.append((len(out), partition, parts))
        out.append(None)
    for index, partition, parts in groups:
        out[index] = (partition, batch_of(parts))
    return out  # type: ignore[return-value]


def batch_of(parts: list[Record]) -> Record:
    """One BATCH command holding `parts` (packable commands of one value type and intent,
    for one partition), stamped as its first part."""
    first = parts[0]
    attributes = b'{"intent":' + orjson.dumps(first.intent) + b',"parts":[' + b",".join(
        part_of(p) for p in parts) + b"]}"  # type: ignore[misc]
    routing = ROUTING_FIELDS[first.value_type]
    batch = Record(RecordType.COMMAND, first.value_type, BATCH,
                   {routing: first.value[routing], "attributes": attributes.decode()},
                   partition_id=first.partition_id, source_position=first.source_position,
                   timestamp_ms=first.timestamp_ms)
    batch.parts = parts
    return batch


def unpack(batch: Record) -> list[Record]:
    """The commands of a BATCH, as they were written; raises `BatchError`."""
    if batch.parts is not None:
        return batch.parts
    text = (batch.value or {}).get("attributes")
    try:
        doc = orjson.loads(text) if text else None
    except orjson.JSONDecodeError as exc:
        raise BatchError(f"a BATCH's attributes are not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("parts"), list):
        raise BatchError('a BATCH\'s attributes must be {"intent": ..., "parts": [...]}')
    intent = doc.get("intent")
    if not isinstance(intent, str) or not intent or intent == BATCH:
        raise BatchError(f"a BATCH's intent must name the intent of its parts (not BATCH), got {intent!r}")
    if not doc["parts"]:
        raise BatchError("a BATCH holds no commands")
    if len(doc["parts"]) > MAX_BATCH_PARTS:
        raise BatchError(f"a BATCH holds at most {MAX_BATCH_PARTS} commands, got {len(doc['parts'])}")
    records = []
    for i, part in enumerate(doc["parts"]):
        if not isinstance(part, dict) or not isinstance(part.get("value"), dict):
            raise BatchError(f'part {i} of the BATCH must be {{"value": {{...}}}}, got {part!r:.80}')
        key, request_id = part.get("key", -1), part.get("request_id")
        if not isinstance(key, int) or not (request_id is None or isinstance(request_id, str)):
            raise BatchError(f"part {i} of the BATCH has a key that is no integer or a request_id that is no string")
        records.append(Record.command(batch.value_type, intent, part["value"], key=key, request_id=request_id))
    return records
