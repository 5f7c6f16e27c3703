"""Job streams of a partition: the worker processes that take pushed jobs of a queue, with
their credits, the jobs they hold (`in_use`) and their leases (docs/proposals/job-push.md).

Stream state is in RocksDB and the changelog, not in memory: a stream's `in_use` must match
its STARTED jobs exactly, and only state committed in the same transaction as those jobs
can guarantee that (a takeover restores both together; a rewound batch undoes both).

Layout: `JOB_STREAMS` (len-prefixed queue, stream id) -> the stream's JSON document;
`JOB_STREAM_LEASES` (lease_until_ms, stream key) -> b"" for the due-date checker; and in
`META`, per queue, the sorted ids of its streams, so that finding a queue's streams is one
point read through the pending writes (a range scan would not see them). Dispatch asks on
every job that becomes startable, so the streams of each queue asked are kept, decoded,
until the writes' generation changes (as `task_queues.py` keeps its queues): a queue
without streams then costs a dictionary lookup.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import orjson

from streamproc.state.db import PartitionDb, PendingWrites
from streamproc.state.families import Family
from streamproc.state.jobs import Job
from streamproc.state.keys import time_upper_bound, u64

_DIRECTORY = b"job_streams:"
_QUEUE_LENGTH = struct.Struct(">H")
#: Looked up once (a member's lookup on its enum class is a Python call per use).
_META, _STREAMS, _LEASES = Family.META, Family.JOB_STREAMS, Family.JOB_STREAM_LEASES


def stream_key(queue: str, stream_id: str) -> bytes:
    """(queue, stream id): the queue length-prefixed, so one queue's streams sort together."""
    q = queue.encode()
    return _QUEUE_LENGTH.pack(len(q)) + q + stream_id.encode()


def read_stream_key(data: bytes) -> tuple[str, str]:
    (length,) = _QUEUE_LENGTH.unpack_from(data)
    end = _QUEUE_LENGTH.size + length
    return data[_QUEUE_LENGTH.size:end].decode(), data[end:].decode()


def lease_key(lease_until_ms: int, queue: str, stream_id: str) -> bytes:
    return u64(lease_until_ms) + stream_key(queue, stream_id)


@dataclass(slots=True)
class JobStream:
    """One worker process's registration for one queue on this partition."""

    queue: str
    stream_id: str
    worker: str
    #: The worker's partition of the replies topic: pushed jobs go there.
    reply_partition: int
    #: How many pushed jobs it may hold unfinished (0: paused).
    credits: int
    #: Its pushed jobs that are STARTED.
    in_use: int
    lease_ms: int
    lease_until_ms: int
    #: Unregistered or expired while some of its pushed jobs were still started: kept only
    #: to count them down (no pushes, RENEW finds no stream; a REGISTER revives it).
    gone: bool = False

    @property
    def free(self) -> int:
        return 0 if self.gone else self.credits - self.in_use

    def record(self) -> dict[str, Any]:
        """The JobStreamRecord value of its events."""
        return {"queue": self.queue, "stream_id": self.stream_id, "worker": self.worker, "credits": self.credits,
                "lease_ms": self.lease_ms, "lease_until_ms": self.lease_until_ms, "in_use": self.in_use}

    def to_json(self) -> dict[str, Any]:
        doc = {"worker": self.worker, "reply_partition": self.reply_partition, "credits": self.credits,
               "in_use": self.in_use, "lease_ms": self.lease_ms, "lease_until_ms": self.lease_until_ms}
        if self.gone:
            doc["gone"] = True
        return doc

    @classmethod
    def from_json(cls, queue: str, stream_id: str, d: dict[str, Any]) -> JobStream:
        return cls(queue, stream_id, d["worker"], d["reply_partition"], d["credits"], d["in_use"], d["lease_ms"],
                   d["lease_until_ms"], d.get("gone", False))


class JobStreams:
    """Stream reads and writes for processors: every method keeps the lease index and the
    queue's list of streams in step with the documents."""

    def __init__(self, writes: PendingWrites) -> None:
        self._w = writes
        #: Each queue asked for: its streams by id, read at the writes' generation `_at`
        #: and changed since only through these methods.
        self._queues: dict[str, dict[str, JobStream]] = {}
        self._at = -1

    def streams_of(self, queue: str) -> dict[str, JobStream]:
        """The queue's streams by id (the gone ones too); do not change them directly."""
        if self._at != self._w.generation:
            self._queues.clear()
            self._at = self._w.generation
        streams = self._queues.get(queue)
        if streams is None:
            streams = self._queues[queue] = self._read(queue)
        return streams

    def _read(self, queue: str) -> dict[str, JobStream]:
        raw = self._w.get(_META, _DIRECTORY + queue.encode())
        streams = {}
        for stream_id in orjson.loads(raw) if raw is not None else ():
            doc = self._w.get(_STREAMS, stream_key(queue, stream_id))
            if doc is not None:
                streams[stream_id] = JobStream.from_json(queue, stream_id, orjson.loads(doc))
        return streams

    def get(self, queue: str, stream_id: str) -> JobStream | None:
        """The stream, if registered (None for a gone one)."""
        stream = self.streams_of(queue).get(stream_id)
        return None if stream is None or stream.gone else stream

    def register(self, queue: str, stream_id: str, worker: str, reply_partition: int, credits: int,
                 lease_ms: int, now_ms: int) -> JobStream:
        """A new stream, or a known one registered again: its pushed jobs still count."""
        streams = self.streams_of(queue)
        stream = streams.get(stream_id)
        if stream is None:
            stream = streams[stream_id] = JobStream(queue, stream_id, worker, reply_partition, credits, 0,
                                                    lease_ms, -1)
            self._write_list(queue, streams)
        stream.worker, stream.reply_partition, stream.gone = worker, reply_partition, False
        self.renew(stream, credits, lease_ms, now_ms)
        return stream

    def renew(self, stream: JobStream, credits: int, lease_ms: int, now_ms: int) -> None:
        """New credits, and a lease until now + lease_ms."""
        self._drop_lease(stream)
        stream.credits, stream.lease_ms, stream.lease_until_ms = credits, lease_ms, now_ms + lease_ms
        self._w.put(_LEASES, lease_key(stream.lease_until_ms, stream.queue, stream.stream_id), b"")
        self._put(stream)

    def remove(self, stream: JobStream) -> None:
        """Unregistered or expired: no more pushes. Its started jobs keep their deadlines; while
        there are any, the stream is kept as gone, so that their ends count it down."""
        self._drop_lease(stream)
        stream.lease_until_ms = -1
        if stream.in_use > 0:
            stream.gone = True
            self._put(stream)
        else:
            self._forget(stream)

    def pick(self, queue: str, key: int, now_ms: int, avoid: str | None = None) -> JobStream | None:
        """The stream job `key` is pushed to, or None when no live stream of the queue has free
        credit: the most free credit wins (join-shortest-queue weighted by capacity); ties
        go by the job key among the tied ids, sorted, so the choice depends on state only.
        A stream whose lease has ended is passed over even before its EXPIRE is processed
        (after an outage the checker's EXPIREs come after the backlog of commands: a dead
        worker's stream would otherwise take jobs that wait out their whole timeout).
        `avoid`: a stream to pass over when another has free credit (a timed out attempt's)."""
        streams = self.streams_of(queue)
        if not streams:
            return None
        open_ = [s for s in streams.values() if s.free > 0 and now_ms <= s.lease_until_ms]
        if avoid is not None and len(open_) > 1:
            open_ = [s for s in open_ if s.stream_id != avoid]
        if not open_:
            return None
        most = max(s.free for s in open_)
        tied = sorted((s for s in open_ if s.free == most), key=lambda s: s.stream_id)
        return tied[key % len(tied)]

    def take(self, stream: JobStream) -> None:
        """A job was pushed to the stream (and STARTED for it)."""
        stream.in_use += 1
        self._put(stream)

    def release(self, job: Job) -> str | None:
        """The pushed attempt of `job` ended: its stream's credit comes back (if the job was
        pushed, and its stream is still known). Returns the stream id it was pushed to."""
        stream_id, job.stream = job.stream, None
        if stream_id is None:
            return None
        stream = self.streams_of(job.type).get(stream_id)
        if stream is not None and stream.in_use > 0:
            stream.in_use -= 1
            if stream.gone and stream.in_use == 0:
                self._forget(stream)
            else:
                self._put(stream)
        return stream_id

    def _put(self, stream: JobStream) -> None:
        self._w.put(_STREAMS, stream_key(stream.queue, stream.stream_id), orjson.dumps(stream.to_json()))

    def _drop_lease(self, stream: JobStream) -> None:
        if stream.lease_until_ms >= 0:
            self._w.delete(_LEASES, lease_key(stream.lease_until_ms, stream.queue, stream.stream_id))

    def _forget(self, stream: JobStream) -> None:
        streams = self.streams_of(stream.queue)
        streams.pop(stream.stream_id, None)
        self._w.delete(_STREAMS, stream_key(stream.queue, stream.stream_id))
        self._write_list(stream.queue, streams)

    def _write_list(self, queue: str, streams: dict[str, JobStream]) -> None:
        if streams:
            self._w.put(_META, _DIRECTORY + queue.encode(), orjson.dumps(sorted(streams)))
        else:
            self._w.delete(_META, _DIRECTORY + queue.encode())


class JobStreamLeases:
    """Read-only view of committed stream leases for the checker: ordered, upper-bounded scans."""

    def __init__(self, db: PartitionDb) -> None:
        self._db = db

    def expired(self, now_ms: int, limit: int) -> list[tuple[int, str, str]]:
        """(lease_until_ms, queue, stream id) of leases that ended strictly before now."""
        out = []
        for key, _ in self._db.scan(_LEASES, time_upper_bound(now_ms), limit):
            queue, stream_id = read_stream_key(key[8:])
            out.append((int.from_bytes(key[:8], "big"), queue, stream_id))
        return out

    def next_end_ms(self) -> int | None:
        """The earliest lease end, or None."""
        first = self._db.first_key(_LEASES)
        return None if first is None else int.from_bytes(first[:8], "big")
