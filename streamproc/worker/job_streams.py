"""A push worker's job stream: its registration for one task queue on every engine partition.

With push (`JobWorker(push=True)`), a partition that makes a job startable activates it in
the same command when a stream of the job's queue has free credit there, and sends the
STARTED record straight to that stream's replies partition (request id
``<stream_id>/<job key>/<attempt>``): no task record, no START, one hop. Without free
credit the job goes to `tasks.<queue>` as before, and the worker's topic consumer takes it
with a confirmed START; under saturation push degrades to the topic path, never worse.

A stream is one worker process (`stream_id`, a uuid) on one partition, with `credits`
(pushed jobs it may hold unfinished there) and a lease that ends it unless renewed. Jobs
of a queue are created on every partition, so a worker registers on each. `JobStream`
keeps that registration alive from its own thread:

* REGISTER on every partition at start, credits ``max(1, max_jobs_active // partitions)``.
* RENEW every lease/3, with those credits, or **0 while an attempt of the worker is
  overdue** (`OverdueAttempts`): the push form of `task_leases` rule 2, a worker that cannot
  finish what it started takes no new work. A change of credits is announced at once.
* A RENEW rejected NOT_FOUND means the partition let the lease end (the engine or the
  broker was away longer than the lease): REGISTER again on that partition.
* A REGISTER with no answer within `REGISTER_ANSWER_S` (an engine that does not know
  streams, or one that is away): log ``job_push_unavailable`` and go on with the topic
  alone; the partition is registered again at the next renewal.
* A REGISTER refused as invalid (credits, names, the queue's policy) is not sent again to
  that partition, and one refused for want of room (RESOURCE_EXHAUSTED) again after
  `REFUSED_RETRY_S`; each reason is logged once.
* On stop, UNREGISTER everywhere (waiting at most a bounded time for the answers). Jobs
  pushed and not run time out at their deadline and are dispatched again, as an
  abandoned START's are.
"""

from __future__ import annotations

import collections
import enum
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import wait as wait_all
from typing import Any, Protocol

import structlog

from streamproc.client.errors import RequestNotSentError
from streamproc.kafka.replies import Reply
from streamproc.protocol.records import JobStreamIntent, RecordType, RejectionType
from streamproc.worker.task_leases import OverdueAttempts

log = structlog.get_logger("streamproc.worker")

#: How long a stream outlives its last REGISTER or RENEW (the engine's default too).
LEASE_MS = 15_000
#: How long a REGISTER waits for its answer before the worker calls push unavailable.
REGISTER_ANSWER_S = 10.0
#: How long the worker's stop waits for the answers to its UNREGISTERs.
UNREGISTER_ANSWER_S = 2.0
#: How often the renewer thread looks at the clock and the overdue attempts.
TICK_S = 0.25
#: How long a stream command's answer is listened for (a late REGISTERED still counts).
ANSWER_TTL_S = 120.0
#: The most credits the engine takes on one partition (`engine/jobs/streams.py`).
MAX_CREDITS = 4096
#: How long a partition that refused a REGISTER for want of room (RESOURCE_EXHAUSTED) is
#: left before the next try; one that refused it as invalid is not asked again.
REFUSED_RETRY_S = 60.0


def credits_per_partition(max_jobs_active: int, partitions: int) -> int:
    """A worker's credits on each partition: its `max_jobs_active` split evenly, at least 1
    (a worker with fewer slots than partitions may hold one job more than it takes from
    the topic; the topic intake's free slots shrink by what was pushed)."""
    return min(MAX_CREDITS, max(1, max_jobs_active // partitions))


def pushed_attempt_began(timeout_ms: int, deadline_ms: int, started_ms: int, log_time_ms: int, wall_now_ms: int,
                         mono_now: float) -> float:
    """The `time.monotonic()` reading a pushed attempt's `timeout_ms` counts from, so that it
    is due on this worker when the engine times it out, and never later than a full timeout
    from now (a clock behind the engine's must not make the worker run an attempt the
    engine has timed out).

    `deadline_ms` and `started_ms` (the STARTED record's time) are on the engine's clock,
    which may be a manual one (the time-skipping test environment); `log_time_ms`, when
    Kafka took the record, is a wall clock's, as `wall_now_ms` is. So the deadline on the
    wall clock is ``log_time_ms + deadline_ms - started_ms``. A record without a deadline
    gets the full timeout from now."""
    if deadline_ms < 0:
        left_ms = timeout_ms
    else:
        wall_deadline_ms = (log_time_ms if log_time_ms > 0 else started_ms) + deadline_ms - started_ms
        left_ms = min(timeout_ms, wall_deadline_ms - wall_now_ms)
    return mono_now + (left_ms - timeout_ms) / 1000


class PushedAttempts:
    """The (job key, attempt) pairs pushed lately, so that a push read twice (a replaced
    replies consumer reads on from its last offset, which may repeat one) runs once. Each
    attempt is pushed once by the engine, so remembering the last `remembered` is enough."""

    def __init__(self, remembered: int = 10_000) -> None:
        self._remembered = remembered
        self._seen: collections.OrderedDict[tuple[int, int], None] = collections.OrderedDict()
        self._lock = threading.Lock()

    def first(self, key: int, attempt: int) -> bool:
        """Whether this is the first push of `attempt` of job `key` (and remember it)."""
        with self._lock:
            if (key, attempt) in self._seen:
                return False
            self._seen[(key, attempt)] = None
            if len(self._seen) > self._remembered:
                self._seen.popitem(last=False)
            return True


class StreamCommands(Protocol):
    """What sends the stream commands (`Client`, through `client/job_streams.py`)."""

    def register_job_stream(self, partition: int, **fields: Any) -> None: ...
    def renew_job_stream(self, partition: int, **fields: Any) -> None: ...
    def unregister_job_stream(self, partition: int, **fields: Any) -> None: ...


class Standing(enum.Enum):
    """Where the stream is on one partition, as far as the worker knows."""

    UNREGISTERED = "unregistered"
    #: REGISTER sent, no answer yet.
    REGISTERING = "registering"
    REGISTERED = "registered"
    #: The partition refused the REGISTER: asked again at `retry_at` (never, if invalid).
    REFUSED = "refused"


class _PartitionStream:
    __slots__ = ("standing", "request_id", "sent_at", "credits", "registers", "retry_at", "refusal")

    def __init__(self) -> None:
        self.standing = Standing.UNREGISTERED
        #: The last REGISTER or RENEW sent: only its answer changes the standing (but see `registers`).
        self.request_id: str | None = None
        self.sent_at = 0.0
        #: The credits that command announced.
        self.credits = 0
        #: REGISTERs sent since the stream was last registered: any one's acceptance
        #: registers it (one answered after the next was sent, the engine being slow).
        self.registers: set[str] = set()
        self.retry_at = 0.0
        #: The last refusal's reason, logged once.
        self.refusal = ""


class JobStream:
    """One worker's stream for `queue` on partitions ``0 .. partitions-1`` (see the module)."""

    def __init__(self, commands: StreamCommands, replies: Any, *, queue: str, worker: str, partitions: int,
                 credits: int, overdue: OverdueAttempts, lease_ms: int = LEASE_MS,
                 clock: Callable[[], float] = time.monotonic, stream_id: str | None = None,
                 registered_everywhere: threading.Event | None = None) -> None:
        """`replies`: the worker's `ReplyListener` (its `partition` and `expect`)."""
        self.commands = commands
        self.replies = replies
        self.queue = queue
        self.worker = worker
        self.stream_id = stream_id or uuid.uuid4().hex
        #: What the engine pushes to this stream: request ids that start with it.
        self.push_prefix = self.stream_id + "/"
        self.credits = credits
        self.overdue = overdue
        self.lease_ms = lease_ms
        self.renew_interval_s = lease_ms / 3000
        #: Set once every partition answered a REGISTER.
        self.registered_everywhere = registered_everywhere or threading.Event()
        self._clock = clock
        self._lock = threading.Lock()
        self._partitions = [_PartitionStream() for _ in range(partitions)]
        self._next_renewal = float("-inf")  # the first tick registers
        self._unavailable = False
        self._closing = False
        #: Held while a stream command is sent: `unregister` takes it to send its
        #: UNREGISTERs after any REGISTER or RENEW under way, and none after them.
        self._send_lock = threading.Lock()

    def standing(self, partition: int) -> Standing:
        with self._lock:
            return self._partitions[partition].standing

    def credits_now(self) -> int:
        """The credits to announce: none while an attempt of this worker is overdue."""
        return 0 if self.overdue.overdue() else self.credits

    # the renewer ------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        """The renewer thread: `tick` every `TICK_S` until `stop` is set or `unregister` called."""
        while True:
            try:
                self.tick()
            except Exception:  # a bug here must not end the stream's renewals for good
                log.exception("job_stream_tick_failed", stream_id=self.stream_id)
            if stop.wait(TICK_S) or self._closing:
                return

    def tick(self) -> None:
        """Send what is due now: REGISTER where the stream is not registered (at start and
        at each renewal), RENEW where it is (at each renewal, or at once when the credits
        changed), and call push unavailable where a REGISTER went unanswered too long."""
        now = self._clock()
        credits = self.credits_now()
        due: list[tuple[int, str, int, str]] = []
        unanswered: list[int] = []
        with self._lock:
            if self._closing:
                return
            renewal = now >= self._next_renewal
            if renewal:
                self._next_renewal = now + self.renew_interval_s
            for p, stream in enumerate(self._partitions):
                if stream.standing is Standing.REFUSED and now >= stream.retry_at:
                    stream.standing = Standing.UNREGISTERED
                if stream.standing is Standing.REGISTERING and now - stream.sent_at >= REGISTER_ANSWER_S:
                    stream.standing = Standing.UNREGISTERED  # a late answer still counts (`registers`)
                    unanswered.append(p)
                if stream.standing is Standing.REGISTERED and (renewal or credits != stream.credits):
                    due.append(self._prepare(p, JobStreamIntent.RENEW, credits, now))
                elif stream.standing is Standing.UNREGISTERED and renewal and credits > 0:
                    # REGISTER needs credit: an overdue worker registers once it is healthy again.
                    due.append(self._prepare(p, JobStreamIntent.REGISTER, credits, now))
            newly_unavailable = bool(unanswered) and not self._unavailable
            self._unavailable = self._unavailable or bool(unanswered)
        if newly_unavailable:
            log.warning("job_push_unavailable", task_queue=self.queue, stream_id=self.stream_id,
                        partitions=unanswered, waited_s=REGISTER_ANSWER_S,
                        hint="no answer to REGISTER: jobs are taken from the task queue's topic only; "
                             "registering again at each renewal")
        for p, intent, credits, request_id in due:
            self._send(p, intent, credits, request_id)

    def _prepare(self, partition: int, intent: str, credits: int, now: float) -> tuple[int, str, int, str]:
        """Note a REGISTER or RENEW about to be sent (under the lock)."""
        stream = self._partitions[partition]
        stream.request_id = uuid.uuid4().hex
        stream.sent_at, stream.credits = now, credits
        if intent == JobStreamIntent.REGISTER:
            stream.standing = Standing.REGISTERING
            stream.registers.add(stream.request_id)
        return partition, intent, credits, stream.request_id

    def _send(self, partition: int, intent: str, credits: int, request_id: str) -> None:
        self.replies.expect(request_id, lambda reply: self._answered(partition, intent, request_id, reply),
                            ANSWER_TTL_S)
        send = (self.commands.register_job_stream if intent == JobStreamIntent.REGISTER
                else self.commands.renew_job_stream)
        with self._send_lock:
            if self._closing:  # unregistered (or about to be): a REGISTER now would outlive the worker
                return
            try:
                send(partition, queue=self.queue, stream_id=self.stream_id, worker=self.worker, credits=credits,
                     lease_ms=self.lease_ms, request_id=request_id, reply_partition=self.replies.partition)
            except RequestNotSentError as exc:  # the broker is away: a REGISTER times out, a RENEW comes again
                log.warning("job_stream_command_not_sent", intent=intent, partition=partition, error=str(exc))

    # answers ----------------------------------------------------------------------------
    def _answered(self, partition: int, intent: str, request_id: str, reply: Reply) -> bool:
        """The engine's answer to a REGISTER or RENEW (on the replies listener's thread)."""
        record = reply.record
        rejected = record.record_type is RecordType.COMMAND_REJECTION
        register_again = None
        refusal_news = False
        with self._lock:
            stream = self._partitions[partition]
            accepted_register = intent == JobStreamIntent.REGISTER and not rejected and request_id in stream.registers
            if self._closing or (request_id != stream.request_id and not accepted_register):
                return True  # superseded by a later command (or stopping): its answer decides
            if intent == JobStreamIntent.REGISTER:
                if rejected:
                    # Refused as invalid (credits, names, the queue's policy): asking again gets the
                    # same answer. For want of room: asked again after a while. Logged once a reason.
                    stream.standing = Standing.REFUSED
                    permanent = record.rejection_type == RejectionType.INVALID_ARGUMENT
                    stream.retry_at = float("inf") if permanent else self._clock() + REFUSED_RETRY_S
                    refusal_news = record.rejection_reason != stream.refusal
                    stream.refusal = record.rejection_reason or ""
                else:
                    stream.standing, stream.refusal = Standing.REGISTERED, ""
                    stream.registers.clear()
                became_available = not rejected and self._unavailable
                if became_available:
                    self._unavailable = False
                everywhere = all(s.standing is Standing.REGISTERED for s in self._partitions)
            elif rejected and record.rejection_type == RejectionType.NOT_FOUND:
                # The lease ended on that partition: its jobs go to the topic until we register again.
                stream.standing = Standing.UNREGISTERED
                credits = self.credits_now()
                if credits > 0:
                    register_again = self._prepare(partition, JobStreamIntent.REGISTER, credits, self._clock())
        if intent == JobStreamIntent.REGISTER:
            if rejected and refusal_news:
                log.error("job_stream_register_refused", task_queue=self.queue, partition=partition,
                          rejection_type=record.rejection_type, reason=record.rejection_reason,
                          hint="jobs of this partition come through the task queue's topic only"
                               + ("" if record.rejection_type == RejectionType.INVALID_ARGUMENT
                                  else f"; registering again in {REFUSED_RETRY_S:.0f} s"))
            else:
                if became_available:
                    log.info("job_push_available", task_queue=self.queue, stream_id=self.stream_id)
                if everywhere and not self.registered_everywhere.is_set():
                    self.registered_everywhere.set()
                    log.info("job_stream_registered", task_queue=self.queue, stream_id=self.stream_id,
                             partitions=len(self._partitions), credits=self.credits)
        elif rejected and register_again is None:
            log.warning("job_stream_renew_refused", task_queue=self.queue, partition=partition,
                        rejection_type=record.rejection_type, reason=record.rejection_reason)
        if register_again is not None:
            log.info("job_stream_lease_ended_registering_again", task_queue=self.queue, partition=partition,
                     stream_id=self.stream_id)
            self._send(*register_again)
        return True

    # stopping ---------------------------------------------------------------------------
    def unregister(self, timeout_s: float = UNREGISTER_ANSWER_S) -> int:
        """Send UNREGISTER to every partition and wait up to `timeout_s` for the answers;
        the number answered. Nothing is registered or renewed after this."""
        with self._send_lock:  # after any REGISTER or RENEW being sent; none is sent after this
            with self._lock:
                self._closing = True
        answers: list[Future[Reply]] = []
        for p in range(len(self._partitions)):
            request_id, answer = uuid.uuid4().hex, Future()
            answers.append(answer)
            self.replies.expect(request_id, lambda reply, answer=answer: answer.set_result(reply) or True,
                                timeout_s + 1)
            try:
                self.commands.unregister_job_stream(p, queue=self.queue, stream_id=self.stream_id,
                                                    request_id=request_id, reply_partition=self.replies.partition)
            except RequestNotSentError as exc:  # the lease ends the stream anyway
                log.warning("job_stream_command_not_sent", intent=JobStreamIntent.UNREGISTER, partition=p,
                            error=str(exc))
        done, _ = wait_all(answers, timeout_s)
        log.info("job_stream_unregistered", task_queue=self.queue, stream_id=self.stream_id,
                 answered=len(done), partitions=len(self._partitions))
        return len(done)
