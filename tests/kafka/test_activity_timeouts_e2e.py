"""Activity timeouts and retry timing end to end, on a real broker, under a manual clock.

The engine runs in a thread of the test with a `ManualClock`; the ActivityWorker and the
ActivityClient are the real ones. Time moves only when a test says so, and only after the
engine has armed the timer the test is waiting for (`Env.fire`): the timer then fires at
the first millisecond after its due time (due dates are strict, `due < now`). So every
time asserted here is exact: attempt scheduled and start times, and the timestamps of the
close events, which are the engine's clock when it wrote them.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from datetime import datetime, timedelta

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from streamproc import activity
from streamproc.activity import ActivityError, ApplicationError, RetryPolicy, RetryState, TimeoutType
from streamproc.client import ActivityClient, Client
from streamproc.clock import ManualClock
from streamproc.kafka.config import consumer_config
from streamproc.protocol import codec
from streamproc.protocol.partitioning import partition_of_key
from streamproc.protocol.records import ActivityIntent as A
from streamproc.protocol.records import Record
from streamproc.protocol.topics import Topics
from streamproc.semantics import normalize_activity_retry_policy
from streamproc.settings import Settings
from streamproc.protocol.wire_values import to_datetime, to_ms
from streamproc.worker import ActivityWorker
from tests.support.engines import EngineThread
from tests.support.history import EventLog
from tests.support.polling import wait_until

pytestmark = pytest.mark.kafka

QUEUE = "timed"
MS = timedelta(milliseconds=1)
SECOND = timedelta(seconds=1)
GIVING_UP = "Not enough time to schedule next retry before activity ScheduleToClose timeout, giving up retrying"


class Env:
    def __init__(self, engine, clock: ManualClock, bootstrap: str, namespace: str,
                 activities: ActivityClient) -> None:
        self.engine, self.clock = engine, clock
        self.bootstrap, self.namespace = bootstrap, namespace
        self.activities = activities
        self.events = EventLog(bootstrap, namespace)
        #: activity.info() of every attempt the worker ran, in the order they ran.
        self.attempts: queue.Queue[activity.Info] = queue.Queue()

    def worker(self, *fns) -> ActivityWorker:
        return ActivityWorker(QUEUE, fns, bootstrap=self.bootstrap, namespace=self.namespace,
                              identity="timed-worker")

    def schedule(self, fn, **options):
        return self.activities.schedule_activity(fn, task_queue=QUEUE, **options)

    def next_attempt(self) -> activity.Info:
        return self.attempts.get(timeout=30)

    def fire(self, due: datetime) -> None:
        """Move the clock just past `due`, once the engine has a timer armed for it.

        Waiting for the timer first is what makes the times exact: the command that armed
        it (a START, a FAIL, an earlier timer) was processed at the clock's current time.
        """
        self.wait_armed(due)
        self.clock.set(to_ms(due) + 1)

    def wait_armed(self, due: datetime) -> None:
        """Until a partition's earliest committed timer is due at `due`."""
        def armed() -> dict[int, int | None]:
            return {p.id: p.checker.next_fire_ms for p in list(self.engine.partitions.values())}
        wait_until(lambda: to_ms(due) in armed().values(), 30,
                   lambda: f"no timer armed for {to_ms(due)} (now {self.clock.now_ms()}): {armed()}")

    def history(self, key: int) -> list[Record]:
        return self.events.activity_history(key, timeout=30)


@pytest.fixture
def env(bootstrap, namespace, tmp_path):
    clock = ManualClock()
    settings = Settings(bootstrap=bootstrap, namespace=namespace, partitions=2,
                        state_dir=tmp_path, engine_id="timeouts")
    with EngineThread(settings, clock=clock, idle_poll_ms=10) as engine, \
            Client(bootstrap, namespace) as client, ActivityClient(client) as activities:
        e = Env(engine, clock, bootstrap, namespace, activities)
        yield e
        e.events.close()


@contextlib.contextmanager
def hanging_worker(env: Env):
    """A worker whose attempts never answer while the test runs."""
    release = threading.Event()

    @activity.defn
    def hangs() -> str:
        env.attempts.put(activity.info())
        release.wait(30)
        return "too late"

    try:
        with env.worker(hangs):
            yield hangs
    finally:
        release.set()


def assert_gave_up_in_attempt_2(env: Env, handle) -> list[Record]:
    """Closed by schedule-to-close while attempt 2 ran, attempt 1 having timed out
    start-to-close: what the caller sees, and the history."""
    with pytest.raises(ActivityError) as caught:
        handle.result(30)
    error = caught.value
    assert error.message == "Activity task timed out" and error.retry_state is RetryState.TIMEOUT
    assert failure_of(error) == (TimeoutType.SCHEDULE_TO_CLOSE, GIVING_UP)
    previous = error.cause.cause  # the failure of the attempt that was retried
    assert (previous.type, previous.message) == (TimeoutType.START_TO_CLOSE, "activity StartToClose timeout")
    history = env.history(handle.key)
    assert intents(history) == [A.SCHEDULED, A.STARTED, A.TIMED_OUT]
    started = history[1].value
    assert started["attempt"] == 2 and started["last_failure"]["timeout_type"] == "START_TO_CLOSE"
    return history


def intents(history: list[Record]) -> list[str]:
    return [r.intent for r in history]


def failure_of(error: ActivityError):
    """(type, message) of the failure an ActivityError stands for."""
    cause = error.cause
    return (cause.type, cause.message)


def failed_activity(env: Env, handle, retry_state: RetryState, cause: tuple[str, str]) -> list[Record]:
    """Wait for the activity to fail with `retry_state` and `cause` (type, message); its
    history, which ends ActivityTaskFailed after the one started attempt."""
    with pytest.raises(ActivityError) as caught:
        handle.result(30)
    error = caught.value
    assert error.message == "Activity task failed" and error.retry_state is retry_state
    assert failure_of(error) == cause
    history = env.history(handle.key)
    assert intents(history) == [A.SCHEDULED, A.STARTED, A.FAILED]
    return history


def test_schedule_to_start_fires_when_no_worker_polls_the_queue(env):
    scheduled = to_datetime(env.clock.now_ms())
    handle = env.schedule("nobody_polls", schedule_to_start_timeout=5 * SECOND,
                          start_to_close_timeout=10 * SECOND)
    env.fire(scheduled + 5 * SECOND)

    with pytest.raises(ActivityError) as caught:
        handle.result(30)
    error = caught.value
    assert error.message == "Activity task timed out" and error.retry_state is RetryState.TIMEOUT
    assert isinstance(error.cause, activity.TimeoutError)
    assert failure_of(error) == (TimeoutType.SCHEDULE_TO_START, "activity ScheduleToStart timeout")
    assert error.cause.cause is None and error.started_event_id == 0
    history = env.history(handle.key)
    assert intents(history) == [A.SCHEDULED, A.TIMED_OUT]  # no attempt started: no Started event
    closed = history[-1]
    assert closed.timestamp_ms == to_ms(scheduled + 5 * SECOND) + 1
    assert (closed.value["attempt"], closed.value["retry_state"]) == (1, "TIMEOUT")


def test_schedule_to_start_counts_from_the_retry_s_scheduled_time_and_is_not_retried(env):
    @activity.defn
    def fails() -> None:
        env.attempts.put(activity.info())
        raise ApplicationError("attempt failed", type="Flaky")

    with env.worker(fails):
        handle = env.schedule(fails, schedule_to_start_timeout=5 * SECOND,
                              start_to_close_timeout=10 * SECOND,
                              retry_policy=RetryPolicy(initial_interval=3 * SECOND))
        first = env.next_attempt()
        retry_due = first.started_time + 3 * SECOND
        env.wait_armed(retry_due)
    # The worker left the queue's group: attempt 2 is dispatched with nobody to run it.
    env.fire(retry_due)
    env.fire(retry_due + 5 * SECOND)

    with pytest.raises(ActivityError) as caught:
        handle.result(30)
    error = caught.value
    assert error.retry_state is RetryState.TIMEOUT
    assert failure_of(error) == (TimeoutType.SCHEDULE_TO_START, "activity ScheduleToStart timeout")
    assert (error.cause.cause.type, error.cause.cause.message) == ("Flaky", "attempt failed")
    history = env.history(handle.key)
    assert intents(history) == [A.SCHEDULED, A.TIMED_OUT]
    closed = history[-1]
    assert closed.value["attempt"] == 2 and closed.value["scheduled_time_ms"] == to_ms(retry_due)
    assert closed.timestamp_ms == to_ms(retry_due + 5 * SECOND) + 1
    assert env.attempts.empty()


def test_schedule_to_close_fires_while_an_attempt_runs(env):
    with hanging_worker(env) as hangs:
        handle = env.schedule(hangs, schedule_to_close_timeout=10 * SECOND, start_to_close_timeout=6 * SECOND,
                              retry_policy=RetryPolicy(initial_interval=SECOND))
        first = env.next_attempt()
        assert first.schedule_to_close_timeout == 10 * SECOND
        assert first.start_to_close_timeout == 6 * SECOND
        env.fire(first.started_time + 6 * SECOND)   # start-to-close: retried after 1 s
        env.fire(first.started_time + 7 * SECOND)   # the backoff ends: attempt 2 is dispatched
        second = env.next_attempt()
        # The backoff counts from the deadline that fired, not from when it was processed.
        assert second.current_attempt_scheduled_time == first.started_time + 7 * SECOND
        assert second.started_time == second.current_attempt_scheduled_time + MS
        env.fire(first.scheduled_time + 10 * SECOND)  # schedule-to-close, before attempt 2's 6 s

    history = assert_gave_up_in_attempt_2(env, handle)
    assert history[-1].timestamp_ms == to_ms(first.scheduled_time + 10 * SECOND) + 1


def test_schedule_to_close_gives_up_at_once_when_the_next_attempt_would_start_after_it(env):
    """A start-to-close timeout at T+5.001 s would retry at T+10.001 s, past the 10 s
    schedule-to-close: the activity closes at once, 5 s before that deadline."""
    with hanging_worker(env) as hangs:
        handle = env.schedule(hangs, schedule_to_close_timeout=10 * SECOND, start_to_close_timeout=2 * SECOND,
                              retry_policy=RetryPolicy(initial_interval=SECOND, backoff_coefficient=5.0))
        first = env.next_attempt()
        env.fire(first.started_time + 2 * SECOND)
        env.fire(first.started_time + 3 * SECOND)
        second = env.next_attempt()
        gave_up_at = second.started_time + 2 * SECOND  # its start-to-close deadline
        assert gave_up_at + 5 * SECOND > first.scheduled_time + 10 * SECOND
        env.fire(gave_up_at)

    history = assert_gave_up_in_attempt_2(env, handle)
    assert history[-1].timestamp_ms == to_ms(gave_up_at) + 1 < to_ms(first.scheduled_time + 10 * SECOND)


def test_a_failure_whose_retry_would_start_after_schedule_to_close_fails_at_once(env):
    @activity.defn
    def fails() -> None:
        env.attempts.put(activity.info())
        raise ApplicationError(f"attempt {activity.info().attempt} failed", type="Flaky")

    with env.worker(fails):
        handle = env.schedule(fails, schedule_to_close_timeout=10 * SECOND,
                              retry_policy=RetryPolicy(initial_interval=3 * SECOND, backoff_coefficient=4.0))
        first = env.next_attempt()
        env.fire(first.started_time + 3 * SECOND)
        second = env.next_attempt()  # fails at T+3.001 s; 12 s more would pass T+10 s
        history = failed_activity(env, handle, RetryState.TIMEOUT, ("Flaky", "attempt 2 failed"))

    assert history[1].value["last_failure"]["message"] == "attempt 1 failed"
    assert history[2].timestamp_ms == to_ms(second.started_time)


def run_failing_attempts(env, policy: RetryPolicy, succeed_at: int | None) -> tuple[list[activity.Info], object]:
    """Schedule an activity that fails until attempt `succeed_at`, firing each backoff as
    soon as it is armed; returns the attempts' info and the handle."""
    @activity.defn
    def flaky() -> int:
        info = activity.info()
        env.attempts.put(info)
        if info.attempt != succeed_at:
            raise ApplicationError(f"attempt {info.attempt} failed", type="Flaky")
        return info.attempt

    seen: list[activity.Info] = []
    with env.worker(flaky):
        handle = env.schedule(flaky, start_to_close_timeout=10 * SECOND, retry_policy=policy)
        while True:
            seen.append(env.next_attempt())
            if seen[-1].attempt in (succeed_at, policy.maximum_attempts):
                break
            delay = min(policy.initial_interval * policy.backoff_coefficient ** (seen[-1].attempt - 1),
                        normalize_activity_retry_policy(policy).maximum_interval)
            env.fire(seen[-1].started_time + delay)
        handle.close_event(30)
    return seen, handle


def retry_delays(attempts: list[activity.Info]) -> list[timedelta]:
    """From each attempt's failure (at its start: the clock stands still while it runs) to
    the next attempt's scheduled time."""
    return [b.current_attempt_scheduled_time - a.started_time for a, b in zip(attempts, attempts[1:])]


def test_retries_back_off_1_2_4_seconds_capped_at_the_maximum_interval(env):
    policy = RetryPolicy(initial_interval=SECOND, backoff_coefficient=2.0, maximum_interval=4 * SECOND)
    attempts, handle = run_failing_attempts(env, policy, succeed_at=5)

    assert handle.result(30) == 5
    assert [a.attempt for a in attempts] == [1, 2, 3, 4, 5]
    assert retry_delays(attempts) == [SECOND, 2 * SECOND, 4 * SECOND, 4 * SECOND]
    # Each attempt starts the millisecond its backoff is over: due dates are strict.
    for a in attempts[1:]:
        assert a.started_time == a.current_attempt_scheduled_time + MS
        assert a.scheduled_time == attempts[0].scheduled_time  # the first scheduled time stays
    gaps = [b.started_time - a.started_time for a, b in zip(attempts, attempts[1:])]
    assert gaps == [SECOND + MS, 2 * SECOND + MS, 4 * SECOND + MS, 4 * SECOND + MS]
    history = env.history(handle.key)
    assert intents(history) == [A.SCHEDULED, A.STARTED, A.COMPLETED]  # retries write no events
    started = history[1].value
    assert started["attempt"] == 5 and started["last_failure"]["message"] == "attempt 4 failed"
    assert started["retry_policy"]["maximum_interval_ms"] == 4000


def test_maximum_attempts_3_fails_after_the_third_attempt(env):
    policy = RetryPolicy(initial_interval=SECOND, backoff_coefficient=2.0, maximum_attempts=3)
    attempts, handle = run_failing_attempts(env, policy, succeed_at=None)

    assert [a.attempt for a in attempts] == [1, 2, 3]
    assert retry_delays(attempts) == [SECOND, 2 * SECOND]
    history = failed_activity(env, handle, RetryState.MAXIMUM_ATTEMPTS_REACHED, ("Flaky", "attempt 3 failed"))
    started, failed = history[1].value, history[2]
    assert started["attempt"] == 3 and started["last_failure"]["message"] == "attempt 2 failed"
    assert failed.timestamp_ms == to_ms(attempts[-1].started_time)  # closed at the failure, no wait
    assert failed.value["retry_state"] == "MAXIMUM_ATTEMPTS_REACHED"


def time_out_command_offset(env: Env, key: int) -> int:
    """Offset of the TIME_OUT command the engine wrote to the log for activity `key`."""
    topic = TopicPartition(Topics(env.namespace).commands, partition_of_key(key), OFFSET_BEGINNING)
    consumer = Consumer(consumer_config(env.bootstrap, f"{env.namespace}.test-reader"))
    consumer.assign([topic])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                record = codec.decode(msg.value(), msg.headers())
                if record.key == key and record.intent == A.TIME_OUT:
                    return msg.offset()
        raise TimeoutError(f"no TIME_OUT for {key} in {topic}")
    finally:
        consumer.close()


def committed_offset(env: Env, partition: int) -> int:
    consumer = Consumer(consumer_config(env.bootstrap, Topics(env.namespace).engine_group))
    try:
        (tp,) = consumer.committed([TopicPartition(Topics(env.namespace).commands, partition)], 30)
        return tp.offset
    finally:
        consumer.close()


def test_reading_its_own_due_commands_back_costs_the_engine_no_transaction(env):
    """A due command is processed in the transaction that writes it to the log; when the
    engine reads it back, its offset rides with the next transaction instead of costing
    one (which would hold up the next real command), or is committed once idle."""
    engine = env.engine
    engine.echo_offsets_max_age_s = 3600  # only a real transaction commits them, for now
    scheduled = to_datetime(env.clock.now_ms())
    commands = engine.stats.commands
    first, second = (env.schedule("nobody_polls", schedule_to_start_timeout=n * SECOND,
                                  start_to_close_timeout=10 * SECOND) for n in (1, 2))
    wait_until(lambda: engine.stats.commands == commands + 2, 30, "both schedules committed")
    batches, echoes = engine.stats.batches, engine.stats.echoes
    for n, handle in ((1, first), (2, second)):
        env.fire(scheduled + n * SECOND)
        with pytest.raises(ActivityError):
            handle.result(30)
        wait_until(lambda: engine.stats.echoes == echoes + n, 30, f"echo {n} read back")
    assert engine.stats.batches == batches + 2  # one per timer, none per echo

    first_echo = time_out_command_offset(env, first.key)
    assert committed_offset(env, partition_of_key(first.key)) > first_echo  # rode with the second timer
    second_echo = time_out_command_offset(env, second.key)
    engine.echo_offsets_max_age_s = 0  # idle now: commit what is left
    wait_until(lambda: committed_offset(env, partition_of_key(second.key)) > second_echo, 30,
               "the second echo's offset committed")
    assert engine.stats.batches == batches + 3
