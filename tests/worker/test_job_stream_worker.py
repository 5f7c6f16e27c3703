"""A push worker's side of job streams, without a broker: the credits it announces, the
renewer's REGISTER / RENEW / REGISTER-again loop on a manual clock, push unavailable when
REGISTER goes unanswered, UNREGISTER on stop, and a real JobWorker taking pushed jobs
(once per attempt, in its slots, within the engine's deadline). The engine's answers are
given by hand."""

from __future__ import annotations

import contextlib
import logging
from unittest import mock

import structlog
import structlog.testing

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import orjson
import pytest

from streamproc.kafka.replies import Reply, ReplyListener
from streamproc.protocol.records import Record, RecordType
from streamproc.protocol.topics import Topics
from streamproc.worker.job_streams import (
    MAX_CREDITS,
    REFUSED_RETRY_S,
    REGISTER_ANSWER_S,
    JobStream,
    PushedAttempts,
    Standing,
    credits_per_partition,
    pushed_attempt_began,
)
from streamproc.worker import job_streams as job_streams_module
from streamproc.worker import job_worker as job_worker_module
from streamproc.worker.job_worker import JobWorker
from streamproc.worker.task_leases import OverdueAttempts

@contextlib.contextmanager
def capture_logs():
    """structlog's `capture_logs`, with the worker modules' loggers made anew inside it and
    nothing filtered by level: a logger used before caches the processors and level of the
    configuration then (`cache_logger_on_first_use`), and another test may have configured
    logging again since, so the module's own logger would not be captured."""
    wrapper = structlog.get_config()["wrapper_class"]
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    try:
        with structlog.testing.capture_logs() as logs, \
                mock.patch.object(job_streams_module, "log", structlog.get_logger("streamproc.worker")), \
                mock.patch.object(job_worker_module, "log", structlog.get_logger("streamproc.worker")):
            yield logs
    finally:
        structlog.configure(wrapper_class=wrapper)


#: A bound on waits that end as soon as what they wait for happens.
WAIT_S = 10


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Commands:
    """The stream commands sent, as (intent, partition, credits, request id)."""

    def __init__(self, partitions: int = 4) -> None:
        self.partitions = partitions
        self.sent: list[tuple[str, int, int, str]] = []

    def register_job_stream(self, partition, **f):
        self.sent.append(("REGISTER", partition, f["credits"], f["request_id"]))

    def renew_job_stream(self, partition, **f):
        self.sent.append(("RENEW", partition, f["credits"], f["request_id"]))

    def unregister_job_stream(self, partition, **f):
        self.sent.append(("UNREGISTER", partition, 0, f["request_id"]))

    def take(self) -> list[tuple[str, int, int, str]]:
        sent, self.sent = self.sent, []
        return sent


class Replies:
    """The worker's replies listener: who waits for what; answered by `answer`."""

    partition = 7

    def __init__(self) -> None:
        self.waiting: dict[str, object] = {}

    def expect(self, request_id, callback, ttl_s):
        self.waiting[request_id] = callback

    def answer(self, request_id: str, intent: str, rejection: str | None = None) -> None:
        if rejection is None:
            record = Record(RecordType.EVENT, "JOB_STREAM", intent, {}, request_id=request_id)
        else:
            record = Record(RecordType.COMMAND_REJECTION, "JOB_STREAM", intent, {}, request_id=request_id,
                            rejection_type=rejection, rejection_reason="no such stream")
        if self.waiting.pop(request_id)(Reply(record, 0)) is not True:
            raise AssertionError("a stream command's callback must be done after its answer")


def _stream(partitions: int = 4, credits: int = 64, lease_ms: int = 15_000):
    clock, commands, replies = Clock(), Commands(partitions), Replies()
    overdue = OverdueAttempts(clock=clock)
    stream = JobStream(commands, replies, queue="orders", worker="w1", partitions=partitions, credits=credits,
                       overdue=overdue, lease_ms=lease_ms, clock=clock)
    return stream, clock, commands, replies, overdue


def _register_everywhere(stream, commands, replies) -> None:
    stream.tick()
    for _, _, _, request_id in commands.take():
        replies.answer(request_id, "REGISTERED")


@pytest.mark.parametrize("max_jobs_active,partitions,credits", [
    (256, 4, 64), (256, 3, 85), (10, 4, 2), (3, 4, 1), (1, 1, 1),
])
def test_credits_split_max_jobs_active_over_the_partitions_at_least_one_each(max_jobs_active, partitions, credits):
    assert credits_per_partition(max_jobs_active, partitions) == credits


def test_register_on_every_partition_then_renew_every_third_of_the_lease():
    stream, clock, commands, replies, _ = _stream()
    stream.tick()
    sent = commands.take()
    assert [(i, p, c) for i, p, c, _ in sent] == [("REGISTER", p, 64, ) for p in range(4)]
    assert {stream.standing(p) for p in range(4)} == {Standing.REGISTERING}
    for _, _, _, request_id in sent[:3]:
        replies.answer(request_id, "REGISTERED")
    assert not stream.registered_everywhere.is_set()
    replies.answer(sent[3][3], "REGISTERED")
    assert stream.registered_everywhere.is_set()

    clock.now += 4.99
    stream.tick()
    assert commands.take() == []
    clock.now += 0.01                                   # lease / 3 = 5 s after the REGISTERs
    stream.tick()
    assert [(i, p, c) for i, p, c, _ in commands.take()] == [("RENEW", p, 64) for p in range(4)]
    clock.now += 5
    stream.tick()
    renewals = commands.take()
    assert [(i, c) for i, _, c, _ in renewals] == [("RENEW", 64)] * 4
    for _, _, _, request_id in renewals:
        replies.answer(request_id, "RENEWED")
    assert {stream.standing(p) for p in range(4)} == {Standing.REGISTERED}


def test_credits_are_zero_while_an_attempt_is_overdue_and_announced_at_once():
    stream, clock, commands, replies, overdue = _stream(partitions=2, credits=8)
    _register_everywhere(stream, commands, replies)
    attempt = object()
    overdue.begin(attempt, 2.0, "job 1 attempt 1")
    clock.now += 1.9
    stream.tick()
    assert commands.take() == []
    clock.now += 0.1                                    # overdue: RENEW with 0 now, not at the renewal
    stream.tick()
    assert [(i, p, c) for i, p, c, _ in commands.take()] == [("RENEW", 0, 0), ("RENEW", 1, 0)]
    clock.now += 0.25
    stream.tick()
    assert commands.take() == []                        # announced once
    clock.now += 3                                      # still overdue at the renewal: 0 again
    stream.tick()
    assert [(i, c) for i, _, c, _ in commands.take()] == [("RENEW", 0), ("RENEW", 0)]
    overdue.end(attempt)
    clock.now += 0.25
    stream.tick()
    assert [(i, p, c) for i, p, c, _ in commands.take()] == [("RENEW", 0, 8), ("RENEW", 1, 8)]


def test_a_renew_rejected_not_found_registers_again_on_that_partition_only():
    stream, clock, commands, replies, _ = _stream(partitions=3, credits=5)
    _register_everywhere(stream, commands, replies)
    clock.now += 5
    stream.tick()
    renewals = commands.take()
    replies.answer(renewals[0][3], "RENEWED")
    with capture_logs() as logs:
        replies.answer(renewals[1][3], "RENEW", rejection="NOT_FOUND")    # its lease ended there
    (again,) = commands.take()
    assert again[:3] == ("REGISTER", 1, 5)
    assert [e["event"] for e in logs] == ["job_stream_lease_ended_registering_again"]
    assert [stream.standing(p) for p in range(3)] == [Standing.REGISTERED, Standing.REGISTERING,
                                                      Standing.REGISTERED]
    replies.answer(again[3], "REGISTERED")
    replies.answer(renewals[2][3], "RENEWED")
    assert [stream.standing(p) for p in range(3)] == [Standing.REGISTERED] * 3
    clock.now += 5
    stream.tick()
    assert [(i, p) for i, p, _, _ in commands.take()] == [("RENEW", 0), ("RENEW", 1), ("RENEW", 2)]


def test_a_stale_answer_changes_nothing():
    """Two RENEWs in flight (a credits change, then the renewal): the first one's NOT_FOUND
    is superseded; only the last command's answer counts."""
    stream, clock, commands, replies, overdue = _stream(partitions=1, credits=5)
    _register_everywhere(stream, commands, replies)
    overdue.begin(object(), 0.0, "job 1 attempt 1")
    stream.tick()
    (first,) = commands.take()
    clock.now += 5
    stream.tick()
    (second,) = commands.take()
    assert (first[0], first[2], second[0], second[2]) == ("RENEW", 0, "RENEW", 0)
    replies.answer(first[3], "RENEW", rejection="NOT_FOUND")
    assert commands.take() == [] and stream.standing(0) is Standing.REGISTERED
    replies.answer(second[3], "RENEWED")
    assert stream.standing(0) is Standing.REGISTERED


def test_an_overdue_worker_whose_lease_ended_registers_again_only_once_healthy():
    """REGISTER needs credit: a worker that cannot finish what it started is not pushed more."""
    stream, clock, commands, replies, overdue = _stream(partitions=1, credits=5)
    _register_everywhere(stream, commands, replies)
    attempt = object()
    overdue.begin(attempt, 0.0, "job 1 attempt 1")
    stream.tick()
    (renew,) = commands.take()
    replies.answer(renew[3], "RENEW", rejection="NOT_FOUND")
    assert commands.take() == [] and stream.standing(0) is Standing.UNREGISTERED
    clock.now += 5
    stream.tick()
    assert commands.take() == []
    overdue.end(attempt)
    clock.now += 5
    stream.tick()
    assert [(i, c) for i, _, c, _ in commands.take()] == [("REGISTER", 5)]


def test_no_answer_to_register_means_push_unavailable_and_registering_again_at_renewals():
    stream, clock, commands, replies, _ = _stream(partitions=2, credits=3)
    stream.tick()
    first = commands.take()
    clock.now += 5                                      # a renewal: nothing registered, REGISTERs pending
    stream.tick()
    assert commands.take() == []
    clock.now += REGISTER_ANSWER_S - 5 - 0.01
    stream.tick()
    assert commands.take() == [] and stream.standing(0) is Standing.REGISTERING
    clock.now += 0.01
    with capture_logs() as logs:
        stream.tick()                                   # 10 s without an answer, at a renewal
    assert [e["event"] for e in logs] == ["job_push_unavailable"]
    assert logs[0]["partitions"] == [0, 1]
    again = commands.take()
    assert [(i, p, c) for i, p, c, _ in again] == [("REGISTER", 0, 3), ("REGISTER", 1, 3)]
    clock.now += 5
    stream.tick()
    clock.now += 5
    with capture_logs() as logs:
        stream.tick()                                   # unanswered again: said once, not every time
    latest = commands.take()
    assert logs == [] and [i for i, *_ in latest] == ["REGISTER", "REGISTER"]
    assert not stream.registered_everywhere.is_set()

    with capture_logs() as logs:
        replies.answer(first[0][3], "REGISTERED")       # the first REGISTER's answer, late: it counts
        assert stream.standing(0) is Standing.REGISTERED and stream.standing(1) is Standing.REGISTERING
        replies.answer(latest[1][3], "REGISTERED")      # the engine answers the latest on partition 1
    assert [e["event"] for e in logs] == ["job_push_available", "job_stream_registered"]
    assert stream.registered_everywhere.is_set()
    replies.answer(latest[0][3], "REGISTERED")          # another REGISTER of partition 0 answered: no change
    assert stream.standing(0) is Standing.REGISTERED


def test_a_register_refused_as_invalid_is_said_once_and_not_sent_again():
    stream, clock, commands, replies, _ = _stream(partitions=1, credits=3)
    stream.tick()
    (register,) = commands.take()
    with capture_logs() as logs:
        replies.answer(register[3], "REGISTER", rejection="INVALID_ARGUMENT")
        for _ in range(20):  # renewals for 100 s: asking again would get the same answer
            clock.now += 5
            stream.tick()
    assert [e["event"] for e in logs] == ["job_stream_register_refused"]
    assert stream.standing(0) is Standing.REFUSED and commands.take() == []


def test_a_register_refused_for_want_of_room_is_sent_again_after_a_while_and_said_once():
    stream, clock, commands, replies, _ = _stream(partitions=1, credits=3)
    stream.tick()
    (register,) = commands.take()
    with capture_logs() as logs:
        replies.answer(register[3], "REGISTER", rejection="RESOURCE_EXHAUSTED")
        clock.now += REFUSED_RETRY_S - 0.01
        stream.tick()
        assert commands.take() == []
        clock.now += 5
        stream.tick()
        (again,) = commands.take()
        replies.answer(again[3], "REGISTER", rejection="RESOURCE_EXHAUSTED")  # the same reason: not said again
    assert [e["event"] for e in logs] == ["job_stream_register_refused"]
    assert again[0] == "REGISTER" and stream.standing(0) is Standing.REFUSED


def test_credits_are_capped_at_what_the_engine_takes():
    assert credits_per_partition(20_000, 4) == MAX_CREDITS


def test_a_register_prepared_before_unregistering_is_not_sent_after_it():
    """The renewer decided on a REGISTER (under the lock) and is about to send it when stop's
    UNREGISTERs go out: sent after them, it would register a worker that is gone."""
    stream, clock, commands, replies, _ = _stream(partitions=1, credits=3)
    with stream._lock:
        prepared = stream._prepare(0, "REGISTER", 3, clock.now)
    stream.unregister(timeout_s=0.01)
    stream._send(*prepared)
    assert [i for i, *_ in commands.take()] == ["UNREGISTER"]


def test_unregister_on_every_partition_waits_for_the_answers_and_ends_the_renewals():
    stream, clock, commands, replies, _ = _stream(partitions=3, credits=3)
    _register_everywhere(stream, commands, replies)

    def answer_unregisters():
        while len(replies.waiting) < 3:
            time.sleep(0.001)
        for request_id in list(replies.waiting):
            replies.answer(request_id, "UNREGISTERED")

    answering = threading.Thread(target=answer_unregisters)
    answering.start()
    assert stream.unregister(timeout_s=WAIT_S) == 3
    answering.join()
    assert [(i, p) for i, p, _, _ in commands.take()] == [("UNREGISTER", p) for p in range(3)]
    clock.now += 5
    stream.tick()
    assert commands.take() == []


def test_unregister_does_not_wait_longer_than_its_bound_for_an_engine_that_is_away():
    stream, _, commands, replies, _ = _stream(partitions=2, credits=3)
    began = time.monotonic()
    assert stream.unregister(timeout_s=0.05) == 0
    assert time.monotonic() - began < WAIT_S
    assert [i for i, *_ in commands.take()] == ["UNREGISTER", "UNREGISTER"]


def test_a_pushed_attempts_timeout_counts_to_the_engines_deadline_never_past_a_full_timeout():
    # 5 s timeout, started at 10 000 on the engine's clock, taken by Kafka then; 2 s later here
    assert pushed_attempt_began(5000, 15_000, 10_000, log_time_ms=10_000, wall_now_ms=12_000, mono_now=50.0) == 48.0
    # a clock behind the engine's: never more than the full timeout from now
    assert pushed_attempt_began(5000, 15_000, 10_000, log_time_ms=10_000, wall_now_ms=9_000, mono_now=50.0) == 50.0
    # an engine on a manual clock (years behind): its deadline is read against Kafka's time
    assert pushed_attempt_began(5000, 1_000_005_000, 1_000_000_000, log_time_ms=1_800_000_000_000,
                                wall_now_ms=1_800_000_001_000, mono_now=50.0) == 49.0
    assert pushed_attempt_began(5000, -1, 10_000, log_time_ms=10_000, wall_now_ms=12_000, mono_now=50.0) == 50.0


def test_pushed_attempts_remember_each_attempt_once_and_forget_the_oldest():
    seen = PushedAttempts(remembered=2)
    assert seen.first(1, 1) and not seen.first(1, 1)
    assert seen.first(1, 2) and seen.first(2, 1)          # (1, 1) forgotten now
    assert not seen.first(2, 1) and seen.first(1, 1)


# a real JobWorker taking pushed jobs ---------------------------------------------------

class WorkerClient(Commands):
    """The worker's client: stream commands and the answers its handlers send."""

    def __init__(self, partitions: int) -> None:
        super().__init__(partitions)
        self.answers: list[tuple[int, int, object]] = []

    def complete_job(self, key, attempt, result=None):
        self.answers.append((key, attempt, result))

    def fail_job(self, key, attempt, retries, error_message="", retry_backoff=None):
        self.answers.append((key, attempt, error_message))


class Intake:
    """The topic intake: records the free slots it is offered, then stops the worker."""

    def __init__(self, worker: JobWorker) -> None:
        self.worker, self.offered = worker, []

    def poll(self, free, take):
        self.offered.append(free)
        self.worker.stop()


def _wait(done, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not done():
        assert time.monotonic() < deadline, f"not within {WAIT_S} s: {what}"
        time.sleep(0.005)


class PushRig:
    """A JobWorker with push on 2 partitions, its pool up and its stream open (the renewer
    thread runs), a replies listener that is not started (records are dispatched to it by
    hand, through its real prefix routing)."""

    def __init__(self, handler, max_concurrent: int = 1, max_jobs_active: int = 2) -> None:
        self.worker = w = JobWorker("orders", handler, bootstrap="127.0.0.1:9", worker_id="w1", push=True,
                                    max_concurrent=max_concurrent, max_jobs_active=max_jobs_active)
        w.client = self.client = WorkerClient(partitions=2)
        w.replies = ReplyListener("127.0.0.1:9", Topics("push-test"), partition=3)
        w._pool = ThreadPoolExecutor(max_concurrent, thread_name_prefix="job")
        w._open_stream()
        _wait(lambda: len(self.client.sent) >= 2, "the renewer's first REGISTERs")

    def push(self, key: int, attempt: int = 1, *, timeout_ms: int = 60_000, deadline_in_ms: int = 60_000,
             stream_id: str | None = None) -> None:
        stream_id = stream_id or self.worker.stream.stream_id
        now_ms = int(time.time() * 1000)
        record = Record(RecordType.EVENT, "JOB", "STARTED", {
            "type": "orders", "payload": orjson.dumps({"n": key}).decode(), "result": None, "retries": 3,
            "timeout_ms": timeout_ms, "attempt": attempt, "worker": "w1", "deadline_ms": now_ms + deadline_in_ms,
            "error_message": "", "retry_backoff_ms": 0, "recur_at_ms": -1, "state": "STARTED"},
            key=key, request_id=f"{stream_id}/{key}/{attempt}", timestamp_ms=now_ms)
        self.worker.replies._dispatch(record, now_ms)  # taken by Kafka just now

    def wait_handled(self, n: int) -> None:
        """`n` handlers returned and their slots are free again."""
        _wait(lambda: self.worker.handled >= n and self.worker._in_flight == 0, f"{n} jobs handled")

    def close(self) -> None:
        self.worker.stop()
        self.worker._pool.shutdown(wait=True)


def test_a_push_read_twice_runs_its_handler_once_and_other_streams_pushes_are_not_ours():
    runs = []
    rig = PushRig(lambda job: runs.append((job.key, job.attempt)) or {"n": job.payload["n"] * 2})
    try:
        stream_commands = [c for c in rig.client.sent if c[0] == "REGISTER"]
        assert sorted(p for _, p, _, _ in stream_commands) == [0, 1]
        assert {c for _, _, c, _ in stream_commands} == {1}           # 2 jobs active over 2 partitions
        rig.push(41)
        rig.push(41)                                                  # read again
        rig.push(41, attempt=2)                                       # the next attempt is another run
        rig.push(42, stream_id="another-workers-stream")
        rig.wait_handled(2)
        assert sorted(runs) == [(41, 1), (41, 2)]
        assert sorted(rig.client.answers) == [(41, 1, {"n": 82}), (41, 2, {"n": 82})]
        assert rig.worker.pushed == 2 and rig.worker._in_flight == 0
    finally:
        rig.close()


def test_pushed_jobs_take_slots_the_topic_intake_then_does_not_offer():
    release = threading.Event()
    rig = PushRig(lambda job: release.wait(WAIT_S), max_concurrent=1, max_jobs_active=3)
    try:
        rig.push(1)
        rig.push(2)                                                   # waits for the one thread
        intake = Intake(rig.worker)
        rig.worker._stop.clear()
        rig.worker._poll(intake, None)
        assert intake.offered == [1]                                   # 3 active at most, 2 pushed
        release.set()
        rig.wait_handled(2)
        rig.worker._stop.clear()
        rig.worker._poll(intake, None)
        assert intake.offered == [1, 3]
    finally:
        release.set()
        rig.close()


def test_a_pushed_job_whose_deadline_passed_while_it_waited_for_a_thread_is_not_run():
    runs, release = [], threading.Event()
    rig = PushRig(lambda job: release.wait(WAIT_S) and runs.append(job.key), max_concurrent=1)
    try:
        with capture_logs() as logs:
            rig.push(4)                                           # holds the one thread
            rig.push(5, timeout_ms=60_000, deadline_in_ms=300)    # waits for it past its deadline
            time.sleep(0.4)
            release.set()
            rig.wait_handled(1)
        assert runs == [4] and rig.worker.pushed == 2
        assert "job_expired_before_its_handler_ran" in [e["event"] for e in logs]
    finally:
        release.set()
        rig.close()


def test_a_push_that_arrives_past_its_deadline_runs_counting_from_its_arrival():
    """This host's clock ahead of the engine's: dropped, such a job would be timed out and
    pushed here again without end."""
    runs = []
    rig = PushRig(lambda job: runs.append(job.key))
    try:
        with capture_logs() as logs:
            rig.push(5, timeout_ms=60_000, deadline_in_ms=-1)     # the engine's deadline is behind our clock
            rig.push(6, timeout_ms=60_000, deadline_in_ms=-1)
            rig.wait_handled(2)
        assert sorted(runs) == [5, 6]
        assert [e["event"] for e in logs].count("job_push_arrived_past_its_deadline") == 1
    finally:
        rig.close()
