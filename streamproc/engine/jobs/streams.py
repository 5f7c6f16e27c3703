"""One processor per job stream command intent (docs/proposals/job-push.md).

A worker process registers a stream for a queue on each partition, with credits (how
many pushed jobs it may hold unfinished) and a lease it renews; startable jobs of the
queue are then pushed to it (`processors.py`, `_dispatch`) instead of published on
tasks.<queue>, as long as it has free credit. A stream that is not renewed is expired by
the due-date checker: its EXPIRE is re-checked here, so a late or repeated one is
rejected harmlessly. Jobs a removed stream started keep their deadlines and time out.
"""

from __future__ import annotations

import re

from streamproc.engine.processing import ProcessingContext, Processor
from streamproc.protocol.codec import excerpt
from streamproc.protocol.records import JobStreamIntent, Record, RejectionType, ValueType
from streamproc.protocol.topics import check_task_queue
from streamproc.state.job_streams import JobStream

JOB_STREAM = ValueType.JOB_STREAM
#: Most pushed jobs a stream may hold on one partition.
MAX_CREDITS = 4096
MIN_LEASE_MS, MAX_LEASE_MS = 1_000, 600_000
MAX_STREAM_ID_CHARS = 64
#: A stream id is the prefix of its pushes' request ids (<stream>/<key>/<attempt>) that its
#: worker listens for: a "/" in it would let one worker's prefix match another's pushes.
_STREAM_ID = re.compile(r"[A-Za-z0-9_-]+")
MAX_WORKER_CHARS = 256
#: Streams one queue may have on a partition (gone ones included): each REGISTER of a new
#: stream rewrites the queue's list, and every dispatch looks at them all.
MAX_STREAMS_PER_QUEUE = 1024


def _named(cmd: Record, verb: str) -> str:
    v = cmd.value
    return f"Expected to {verb} job stream {excerpt(v['stream_id'])} of queue {excerpt(v['queue'])}, but"


def _names_problem(cmd: Record) -> str | None:
    v = cmd.value
    stream_id = v["stream_id"]
    if not 0 < len(stream_id) <= MAX_STREAM_ID_CHARS:
        return f"stream_id must be 1-{MAX_STREAM_ID_CHARS} characters, got {len(stream_id)}"
    if not _STREAM_ID.fullmatch(stream_id):
        return f"stream_id may only have letters, digits, '_' and '-', got {excerpt(stream_id)}"
    return check_task_queue(v["queue"])


def _terms_problem(cmd: Record, min_credits: int) -> str | None:
    v = cmd.value
    if not min_credits <= v["credits"] <= MAX_CREDITS:
        return f"credits must be in [{min_credits}, {MAX_CREDITS}], got {v['credits']}"
    if not MIN_LEASE_MS <= v["lease_ms"] <= MAX_LEASE_MS:
        return f"lease_ms must be in [{MIN_LEASE_MS}, {MAX_LEASE_MS}], got {v['lease_ms']}"
    return None


def register(cmd: Record, ctx: ProcessingContext) -> None:
    v = cmd.value
    problem = _names_problem(cmd) or _terms_problem(cmd, min_credits=1)
    if problem is None and cmd.reply_partition < 0:
        problem = "reply_partition must be set: it is the replies partition where pushed jobs go"
    if problem is None and len(v["worker"]) > MAX_WORKER_CHARS:
        problem = f"worker must be at most {MAX_WORKER_CHARS} characters, got {len(v['worker'])}"
    problem = problem or ctx.admit_task_queue(v["queue"])
    if problem:
        ctx.out.reject(cmd, RejectionType.INVALID_ARGUMENT, f"{_named(cmd, 'register')} {problem}")
        return
    streams = ctx.job_streams.streams_of(v["queue"])
    if v["stream_id"] not in streams and len(streams) >= MAX_STREAMS_PER_QUEUE:
        ctx.out.reject(cmd, RejectionType.RESOURCE_EXHAUSTED,
                       f"{_named(cmd, 'register')} the queue has {len(streams)} streams on partition "
                       f"{ctx.out.partition}, the most it may have")
        return
    stream = ctx.job_streams.register(v["queue"], v["stream_id"], v["worker"], cmd.reply_partition,
                                      v["credits"], v["lease_ms"], ctx.now_ms)
    ctx.out.event(JOB_STREAM, JobStreamIntent.REGISTERED, -1, stream.record())


def _known(cmd: Record, ctx: ProcessingContext, verb: str) -> JobStream | None:
    """The stream the command names, or None after writing the NOT_FOUND rejection."""
    stream = ctx.job_streams.get(cmd.value["queue"], cmd.value["stream_id"])
    if stream is None:
        ctx.out.reject(cmd, RejectionType.NOT_FOUND,
                       f"{_named(cmd, verb)} no such stream is registered on partition {ctx.out.partition}")
    return stream


def _valid_and_known(cmd: Record, ctx: ProcessingContext, verb: str, problem: str | None) -> JobStream | None:
    """The stream a command with valid fields names, or None after its rejection."""
    if problem:
        ctx.out.reject(cmd, RejectionType.INVALID_ARGUMENT, f"{_named(cmd, verb)} {problem}")
        return None
    return _known(cmd, ctx, verb)


def renew(cmd: Record, ctx: ProcessingContext) -> None:
    v = cmd.value
    stream = _valid_and_known(cmd, ctx, "renew", _names_problem(cmd) or _terms_problem(cmd, min_credits=0))
    if stream is None:
        return
    ctx.job_streams.renew(stream, v["credits"], v["lease_ms"], ctx.now_ms)
    ctx.out.event(JOB_STREAM, JobStreamIntent.RENEWED, -1, stream.record())


def unregister(cmd: Record, ctx: ProcessingContext) -> None:
    stream = _valid_and_known(cmd, ctx, "unregister", _names_problem(cmd))
    if stream is None:
        return
    value = stream.record()
    ctx.job_streams.remove(stream)
    ctx.out.event(JOB_STREAM, JobStreamIntent.UNREGISTERED, -1, value)


def expire(cmd: Record, ctx: ProcessingContext) -> None:
    """From the due-date checker, maybe twice or late: accepted only if the stream's lease
    still ends at the time the command names, and that time has passed."""
    due = cmd.value["lease_until_ms"]
    stream = ctx.job_streams.get(cmd.value["queue"], cmd.value["stream_id"])
    prefix = f"{_named(cmd, 'expire')} (lease until {due})"
    if stream is None:
        ctx.out.reject(cmd, RejectionType.NOT_FOUND, f"{prefix} no such stream is registered")
    elif stream.lease_until_ms != due:
        ctx.out.reject(cmd, RejectionType.INVALID_STATE, f"{prefix} its lease now ends at {stream.lease_until_ms}")
    elif not due < ctx.now_ms:
        ctx.out.reject(cmd, RejectionType.INVALID_STATE, f"{prefix} that time has not passed (now {ctx.now_ms})")
    else:
        value = stream.record()
        ctx.job_streams.remove(stream)
        ctx.out.event(JOB_STREAM, JobStreamIntent.EXPIRED, -1, value)


JOB_STREAM_PROCESSORS: dict[str, Processor] = {
    JobStreamIntent.REGISTER: register,
    JobStreamIntent.RENEW: renew,
    JobStreamIntent.UNREGISTER: unregister,
    JobStreamIntent.EXPIRE: expire,
}
