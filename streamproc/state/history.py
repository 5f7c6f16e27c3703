"""Event histories of workflow runs, one ordered column family keyed (run key, event id).

Appending is one put; reading a page is a range scan. Events are written once and never
changed, so a scan of committed state plus point reads of the batch's own newest events
(not in RocksDB yet) gives exactly the history the processor has written so far.
"""

from __future__ import annotations

import struct
from typing import Any

import orjson

from streamproc.state.db import PendingWrites
from streamproc.state.families import Family

_RUN_EVENT = struct.Struct(">QQ")
#: Enum members looked up once (a member's lookup on its class is a Python call per use).
_HISTORY = Family.WORKFLOW_HISTORY
#: Up to this many older events are read by key rather than by a scan.
_POINT_READS = 4

HistoryEvent = dict[str, Any]


def _key(run_key: int, event_id: int) -> bytes:
    return _RUN_EVENT.pack(run_key, event_id)


class History:
    def __init__(self, writes: PendingWrites) -> None:
        self._w = writes

    def append(self, run_key: int, event: HistoryEvent) -> int:
        """Store an event (its `event_id` is its place); returns its encoded size in bytes."""
        data = orjson.dumps(event)
        self._w.put(_HISTORY, _key(run_key, event["event_id"]), data)
        return len(data)

    def append_encoded(self, run_key: int, event_id: int, event_type: str, event_time_ms: int,
                       attributes_json: bytes) -> int:
        """`append` of an event whose attributes are encoded already: the same bytes as
        `append` stores (orjson's compact output, keys in this order; an event type is a
        plain name, nothing in it to escape)."""
        data = b'{"event_id":%d,"event_type":"%s","event_time_ms":%d,"attributes":%s}' % (
            event_id, event_type.encode(), event_time_ms, attributes_json)
        self._w.put(_HISTORY, _key(run_key, event_id), data)
        return len(data)

    def events(self, run_key: int, first_id: int, last_id: int) -> list[HistoryEvent]:
        """Events `first_id`..`last_id` (inclusive) of a run, in order."""
        return [orjson.loads(data) for data in self.encoded_events(run_key, first_id, last_id)]

    def encoded_events(self, run_key: int, first_id: int, last_id: int) -> list[bytes]:
        """The same events as JSON bytes, as stored (pages are built without re-encoding)."""
        # The newest events are often not in RocksDB yet (this batch's, or the one committing):
        # those are taken from the writes, and RocksDB is scanned only for older ones, if any.
        newest = []
        while last_id >= first_id:
            data = self._w.unwritten(_HISTORY, _key(run_key, last_id))
            if data is None:
                break
            newest.append(data)
            last_id -= 1
        newest.reverse()
        if last_id < first_id:
            return newest
        if last_id - first_id < _POINT_READS:
            # A few older events (a handed-back task's history starts at the previous task's
            # Scheduled, committed by the batch before): read by key, cheaper than a scan.
            older = [self._w.get(_HISTORY, _key(run_key, event_id))
                     for event_id in range(first_id, last_id + 1)]
            if None not in older:
                return older + newest
        found: dict[int, bytes] = {}
        committed = self._w.db.scan(_HISTORY, lower_bound=_key(run_key, first_id),
                                    upper_bound=_key(run_key, last_id + 1))
        for key, value in committed:
            found[_RUN_EVENT.unpack(key)[1]] = value
        out = []
        for event_id in range(first_id, last_id + 1):
            data = found.get(event_id)
            if data is None:  # written by this batch, not committed yet
                data = self._w.get(_HISTORY, _key(run_key, event_id))
                if data is None:
                    raise KeyError(f"event {event_id} of run {run_key} is missing")
            out.append(data)
        return out + newest
