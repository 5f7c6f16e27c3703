"""A `streamproc.Record` written from parts whose bytes repeat from record to record.

A record is its head (record type, value type, intent), its middle (key, partition,
source position, timestamp, request id, rejection type and reason, reply partition), the
value's union (one of five, the others null) and the value. The engine writes a
command's records one after the other, stamped alike: a workflow task's answer makes four
history events and the task handed back, all with the run's key and the command's
position, time and request id. Writing the head and the middle field by field was more
than half of encoding such an event (the value, a sparse WorkflowRecord, the rest). Here
a head is written once per (record type, value type, intent) and kept, the last middle
is kept and reused while records repeat it, and only the value is written each time.

Heads and middles are written by the compiled writer itself (a middle not kept is written
with its head, as the record's start, and sliced from it; a head not kept, with an empty
middle), so the bytes are the ones it writes, and what it refuses is refused: a part not
kept yet raises as the compiled writer does, and a middle is reused only for ints (a float
equal to a kept int, 1.0 for 1, is written anew, and refused).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamproc.protocol.records import Record

#: Heads kept at most (intents repeated in rejections may be anything a sender wrote).
HEAD_CACHE_SIZE = 1024
#: The longest head kept: a rejection repeats the value type and intent a sender wrote, up to
#: a command's size; kept, 1,024 distinct ones could pin a gigabyte. Ours are a few bytes.
HEAD_KEPT_MAX_BYTES = 256
#: The empty middle's bytes: key, partition, position and timestamp 0 (one byte each),
#: three null unions, reply partition 0.
_EMPTY_MIDDLE_BYTES = 8


class RecordParts:
    """`encode(record)` as `write_fields(bytearray(), *the record's fields)` writes it, from
    kept parts. `value_writers`: the writer of each value union's record, in the schema's
    order; every value union is [null, record] (`codec.check_record_schema` checks)."""

    def __init__(self, write_fields: Callable[..., bytearray], value_writers: list[Callable[[Any, bytearray], Any]],
                 value_slots: dict[str, int]) -> None:
        self._write_fields = write_fields
        self._slots = value_slots
        count = len(value_writers)
        self._nulls = bytes(count)
        #: Per value slot: (the union bytes before the value, its writer, the bytes after it).
        self._values = [(bytes(slot) + b"\x02", writer, bytes(count - slot - 1))
                        for slot, writer in enumerate(value_writers)]
        self._empties = (None,) * count
        self._heads: dict[tuple, bytes] = {}
        self._middle: tuple[tuple, bytes] = ((), b"")

    def encode(self, record: Record) -> bytes:
        head_of = (record.record_type, record.value_type, record.intent)
        head = self._heads.get(head_of)
        if head is None:
            head = self._head(head_of)
        middle_of = (record.key, record.partition_id, record.source_position, record.timestamp_ms,
                     record.request_id, record.rejection_type, record.rejection_reason, record.reply_partition)
        kept_of, middle = self._middle  # one read: another thread may replace it meanwhile
        if kept_of == middle_of and (type(record.key) is type(record.partition_id) is type(record.source_position)
                                     is type(record.timestamp_ms) is type(record.reply_partition) is int):
            b = bytearray(head)
            b += middle
        else:
            # Head and middle written at once (a lone record costs what it did), the middle kept.
            b = self._write_fields(bytearray(), *head_of, *middle_of, *self._empties)
            del b[-len(self._empties):]
            self._middle = (middle_of, bytes(b[len(head):]))
        slot = self._slots.get(record.value_type)
        value = record.value
        if slot is None or value is None:
            b += self._nulls
        else:
            before, writer, after = self._values[slot]
            b += before
            writer(value, b)
            b += after
        return bytes(b)

    def _head(self, head_of: tuple) -> bytes:
        written = self._write_fields(bytearray(), *head_of, 0, 0, 0, 0, None, None, None, 0, *self._empties)
        head = bytes(written[:-_EMPTY_MIDDLE_BYTES - len(self._empties)])
        if len(head) > HEAD_KEPT_MAX_BYTES:
            return head
        if len(self._heads) >= HEAD_CACHE_SIZE:
            self._heads.clear()
        self._heads[head_of] = head
        return head
