"""Activities end to end on a real broker: engine, ActivityWorker and ActivityClient.

The engine runs in a thread with the system clock and a 10 ms idle poll, so timeouts
here are short real ones (0.5 to 1 s). Nothing asserts on how long something took:
activities that must outlive a timeout wait on an event the test sets afterwards.
"""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta

import orjson
import pytest
import structlog

from streamproc import activity
from streamproc.activity import ActivityError, ApplicationError, RetryPolicy, RetryState, TimeoutType
from streamproc.client import ActivityClient, Client
from streamproc.protocol.partitioning import partition_for
from streamproc.protocol.records import ActivityIntent as A
from streamproc.protocol.records import Record
from streamproc.worker import ActivityWorker
from tests.support.engines import EngineThread
from tests.support.history import EventLog

pytestmark = pytest.mark.kafka

QUEUE = "acts"
MS = timedelta(milliseconds=1)
CLOSED = (A.COMPLETED, A.FAILED, A.TIMED_OUT, A.CANCELED)
FAST_RETRY = RetryPolicy(initial_interval=100 * MS, backoff_coefficient=1.0)


class Env:
    def __init__(self, bootstrap: str, namespace: str, client: Client, activities: ActivityClient) -> None:
        self.bootstrap, self.namespace = bootstrap, namespace
        self.client, self.activities = client, activities
        self.events = EventLog(bootstrap, namespace)

    def worker(self, *fns, **options) -> ActivityWorker:
        return ActivityWorker(QUEUE, fns, bootstrap=self.bootstrap, namespace=self.namespace,
                              identity="test-worker", **options)

    def schedule(self, fn, *args, **options):
        options.setdefault("start_to_close_timeout", timedelta(seconds=20))
        return self.activities.schedule_activity(fn, *args, task_queue=QUEUE, **options)

    def history(self, key: int) -> list[Record]:
        """The activity's events once it closed, in order."""
        def closed(e):
            return any(r.key == key and r.intent in CLOSED for r in e.events("ACTIVITY_TASK"))
        self.events.read_until(closed, timeout=30)
        return [r for r in self.events.events("ACTIVITY_TASK") if r.key == key]


@pytest.fixture
def env(bootstrap, namespace, tmp_path):
    with EngineThread.on(bootstrap, namespace, tmp_path, "activities"), Client(bootstrap, namespace) as client, \
            ActivityClient(client) as activities:
        e = Env(bootstrap, namespace, client, activities)
        yield e
        e.events.close()


def intents(history: list[Record]) -> list[str]:
    return [r.intent for r in history]


def assert_closed_at_the_first_attempt(env: Env, handles: list, closed: str) -> None:
    """Each activity's history: scheduled, started (attempt 1), then `closed`."""
    for handle in handles:
        history = env.history(handle.key)
        assert intents(history) == [A.SCHEDULED, A.STARTED, closed]
        assert history[1].value["attempt"] == 1


def test_an_activity_completes_with_its_result_and_sees_its_info(env):
    @activity.defn(name="greet")
    def greet(name: str, punctuation: str) -> dict:
        info = activity.info()
        return {"text": f"hello {name}{punctuation}", "attempt": info.attempt, "id": info.activity_id,
                "queue": info.task_queue, "type": info.activity_type,
                "start_to_close_ms": info.start_to_close_timeout // MS,
                "heartbeat_timeout": info.heartbeat_timeout, "details": list(info.heartbeat_details),
                "started_after_scheduled": info.started_time >= info.scheduled_time}

    @activity.defn
    async def shout(text: str) -> str:
        await asyncio.sleep(0)
        return f"{text.upper()} (attempt {activity.info().attempt})"

    with env.worker(greet, shout) as worker:
        handle = env.schedule(greet, "ann", "!", activity_id="greet-1",
                              start_to_close_timeout=timedelta(seconds=10))
        assert handle.result(30) == {
            "text": "hello ann!", "attempt": 1, "id": "greet-1", "queue": QUEUE, "type": "greet",
            "start_to_close_ms": 10_000, "heartbeat_timeout": None, "details": [],
            "started_after_scheduled": True}
        assert env.activities.execute_activity(shout, "hey", task_queue=QUEUE, result_timeout=30,
                                               start_to_close_timeout=timedelta(seconds=10)) == "HEY (attempt 1)"

    history = env.history(handle.key)
    assert intents(history) == [A.SCHEDULED, A.STARTED, A.COMPLETED]
    started = history[1].value
    assert started["attempt"] == 1 and started["identity"] == "test-worker" and started["last_failure"] is None
    assert worker.stats.started == 2 and worker.stats.completed == 2


def test_a_retryable_error_twice_then_success_leaves_one_started_event(env):
    @activity.defn
    def flaky() -> int:
        attempt = activity.info().attempt
        if attempt < 3:
            raise ApplicationError(f"attempt {attempt} failed", {"attempt": attempt}, type="Flaky")
        return attempt

    with env.worker(flaky):
        handle = env.schedule(flaky, retry_policy=FAST_RETRY)
        assert handle.result(30) == 3

    history = env.history(handle.key)
    assert intents(history) == [A.SCHEDULED, A.STARTED, A.COMPLETED]
    started = history[1].value
    assert started["attempt"] == 3
    last = started["last_failure"]
    assert (last["kind"], last["type"], last["message"]) == ("APPLICATION", "Flaky", "attempt 2 failed")
    # Not checked: last_failure's details and stack trace. The engine keeps last_failure
    # as the semantics' Failure, which has neither, so both are empty here (engine gap,
    # reported to the lead; Temporal keeps the failure as the worker reported it).


def test_one_attempt_allowed_fails_with_maximum_attempts_reached(env):
    @activity.defn
    def broken(order: str) -> None:
        try:
            {}[order]
        except KeyError as exc:
            raise ApplicationError(f"no such order {order}", {"order": order}, type="OrderMissing") from exc

    with env.worker(broken):
        handle = env.schedule(broken, "o-7", retry_policy=RetryPolicy(maximum_attempts=1))
        with pytest.raises(ActivityError) as caught:
            handle.result(30)

    error = caught.value
    assert error.message == "Activity task failed" and error.retry_state is RetryState.MAXIMUM_ATTEMPTS_REACHED
    assert isinstance(error.cause, ApplicationError)
    assert (error.cause.type, error.cause.message) == ("OrderMissing", "no such order o-7")
    assert error.activity_type == "broken" and error.identity == "test-worker"
    history = env.history(handle.key)
    assert intents(history) == [A.SCHEDULED, A.STARTED, A.FAILED]
    assert history[2].value["retry_state"] == "MAXIMUM_ATTEMPTS_REACHED"
    failure = history[2].value["failure"]  # as the worker reported it, cause and all
    assert (failure["type"], orjson.loads(failure["details"])) == ("OrderMissing", [{"order": "o-7"}])
    assert "broken" in failure["stack_trace"] and failure["cause"]["type"] == "KeyError"
    assert error.cause.details == ({"order": "o-7"},)
    assert isinstance(error.cause.cause, ApplicationError) and error.cause.cause.type == "KeyError"


def test_non_retryable_errors_end_the_activity_at_the_first_attempt(env):
    @activity.defn
    def refuse() -> None:
        raise ApplicationError("card declined", type="Declined", non_retryable=True)

    @activity.defn
    def lookup() -> None:
        raise KeyError("sku-1")

    with env.worker(refuse, lookup):
        handles = [env.schedule(refuse, retry_policy=FAST_RETRY),
                   env.schedule(lookup, retry_policy=RetryPolicy(initial_interval=100 * MS,
                                                                 non_retryable_error_types=["KeyError"])),
                   env.schedule("missing_activity", retry_policy=FAST_RETRY)]
        causes = []
        for handle in handles:
            with pytest.raises(ActivityError) as caught:
                handle.result(30)
            assert caught.value.retry_state is RetryState.NON_RETRYABLE_FAILURE
            causes.append(caught.value.cause)

    assert [c.type for c in causes] == ["Declined", "KeyError", "NotFoundError"]
    assert causes[0].non_retryable and not causes[1].non_retryable and causes[2].non_retryable
    assert causes[2].message == ("Activity function missing_activity is not registered on this worker, "
                                 "available activities: lookup, refuse")
    assert_closed_at_the_first_attempt(env, handles, A.FAILED)


def test_a_start_to_close_timeout_is_retried_and_the_retry_succeeds(env):
    release = threading.Event()

    @activity.defn
    def slow_then_fast() -> str:
        if activity.info().attempt == 1:
            release.wait(30)  # outlives its 500 ms start-to-close timeout
            return "late"
        return "fast"

    try:
        with env.worker(slow_then_fast):
            handle = env.schedule(slow_then_fast, start_to_close_timeout=500 * MS, retry_policy=FAST_RETRY)
            assert handle.result(30) == "fast"
    finally:
        release.set()

    history = env.history(handle.key)
    assert intents(history) == [A.SCHEDULED, A.STARTED, A.COMPLETED]
    started = history[1].value
    assert started["attempt"] == 2
    last = started["last_failure"]
    assert (last["kind"], last["timeout_type"], last["message"]) == (
        "TIMEOUT", "START_TO_CLOSE", "activity StartToClose timeout")


def test_heartbeats_keep_a_long_activity_alive_past_its_heartbeat_timeout(env):
    @activity.defn
    async def long_running(seconds: float) -> int:
        loop = asyncio.get_running_loop()
        end, beats = loop.time() + seconds, 0
        while loop.time() < end:
            activity.heartbeat(beats)
            beats += 1
            await asyncio.sleep(0.02)
        return beats

    @activity.defn
    def long_running_sync(seconds: float) -> str:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            activity.heartbeat("still here")
            time.sleep(0.02)
        return "done"

    with env.worker(long_running, long_running_sync):
        options = dict(heartbeat_timeout=timedelta(seconds=1), retry_policy=RetryPolicy(maximum_attempts=1))
        handles = [env.schedule(long_running, 3.0, **options), env.schedule(long_running_sync, 3.0, **options)]
        assert handles[0].result(30) > 10
        assert handles[1].result(30) == "done"

    assert_closed_at_the_first_attempt(env, handles, A.COMPLETED)


def test_a_stopped_heartbeat_times_out_and_a_retry_resumes_from_its_details(env):
    release = threading.Event()

    @activity.defn
    def resumable(step_count: int) -> dict:
        info = activity.info()
        if info.attempt == 1:
            for step in range(step_count):
                activity.heartbeat(step)
            release.wait(30)  # stops heartbeating
            return {"attempt": 1}
        return {"attempt": info.attempt, "resumed_from": list(info.heartbeat_details)}

    try:
        with env.worker(resumable):
            options = dict(heartbeat_timeout=timedelta(seconds=1))
            retried = env.schedule(resumable, 3, retry_policy=FAST_RETRY, **options)
            once = env.schedule(resumable, 5, retry_policy=RetryPolicy(maximum_attempts=1), **options)
            assert retried.result(30) == {"attempt": 2, "resumed_from": [2]}
            with pytest.raises(ActivityError) as caught:
                once.result(30)
    finally:
        release.set()

    started = env.history(retried.key)[1].value
    assert started["attempt"] == 2
    assert (started["last_failure"]["timeout_type"], started["last_failure"]["message"]) == (
        "HEARTBEAT", "activity Heartbeat timeout")
    error = caught.value
    assert error.message == "Activity task timed out" and error.retry_state is RetryState.MAXIMUM_ATTEMPTS_REACHED
    assert isinstance(error.cause, activity.TimeoutError) and error.cause.type is TimeoutType.HEARTBEAT
    assert error.cause.last_heartbeat_details == (4,)
    assert intents(env.history(once.key)) == [A.SCHEDULED, A.STARTED, A.TIMED_OUT]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_cancelling_a_running_heartbeating_activity(env, kind):
    running, cleaned_up = threading.Event(), threading.Event()

    @activity.defn
    def busy() -> None:
        running.set()
        try:
            while True:
                activity.heartbeat("busy")  # raises CancelledError once cancellation is known
                time.sleep(0.02)
        finally:
            cleaned_up.set()

    @activity.defn
    async def busy_async() -> None:
        running.set()
        try:
            while True:
                activity.heartbeat("busy")
                await asyncio.sleep(0.02)  # asyncio.CancelledError arrives here
        finally:
            cleaned_up.set()

    with env.worker(busy, busy_async) as worker:
        handle = env.schedule(busy if kind == "sync" else busy_async, heartbeat_timeout=500 * MS)
        assert running.wait(30)
        handle.cancel()
        with pytest.raises(ActivityError) as caught:
            handle.result(30)

    assert cleaned_up.is_set()
    error = caught.value
    assert error.message == "Activity task canceled" and error.retry_state is RetryState.CANCEL_REQUESTED
    assert isinstance(error.cause, activity.CancelledError)
    assert intents(env.history(handle.key)) == [A.SCHEDULED, A.CANCEL_REQUESTED, A.STARTED, A.CANCELED]
    assert worker.stats.canceled == 1


def test_cancelling_an_activity_no_worker_started_closes_it_at_once(env):
    handle = env.schedule("nobody_runs_this")
    handle.cancel()
    with pytest.raises(ActivityError) as caught:
        handle.result(30)
    assert caught.value.cause.details == ("ACTIVITY_ID_NOT_STARTED",)
    assert intents(env.history(handle.key)) == [A.SCHEDULED, A.CANCEL_REQUESTED, A.CANCELED]
    with pytest.raises(activity.CommandRejectedError) as rejected:
        handle.cancel()
    assert rejected.value.rejection_type == "NOT_FOUND"


def late_completions(events: EventLog) -> list[Record]:
    return [r for r in events.rejections() if r.intent == A.COMPLETE]


def test_a_late_answer_after_a_timeout_is_rejected_or_dropped_and_logged(env):
    release = threading.Event()

    @activity.defn
    def oblivious() -> str:
        release.wait(30)  # past its start-to-close timeout, never heartbeating
        return "too late"

    @activity.defn
    def heartbeats_after_waking() -> str:
        release.wait(30)
        for _ in range(500):  # the first heartbeat is refused: the next one raises CancelledError
            activity.heartbeat("awake")
            time.sleep(0.02)
        return "unreachable"

    once = dict(start_to_close_timeout=500 * MS, retry_policy=RetryPolicy(maximum_attempts=1))
    with structlog.testing.capture_logs() as logs:
        try:
            with env.worker(oblivious, heartbeats_after_waking) as worker:
                handles = [env.schedule(oblivious, **once), env.schedule(heartbeats_after_waking, **once)]
                for handle in handles:
                    with pytest.raises(ActivityError) as caught:
                        handle.result(30)
                    assert caught.value.cause.type is TimeoutType.START_TO_CLOSE
                release.set()
                env.events.read_until(lambda e: late_completions(e), timeout=30)
                deadline = time.monotonic() + 30
                while (worker.stats.rejected, worker.stats.dropped) != (1, 1) and time.monotonic() < deadline:
                    time.sleep(0.02)
        finally:
            release.set()

    (rejection,) = late_completions(env.events)
    assert rejection.key == handles[0].key
    assert rejection.rejection_type == "NOT_FOUND" and "no such activity is open" in rejection.rejection_reason
    assert (worker.stats.rejected, worker.stats.dropped) == (1, 1)
    by_event = {entry["event"]: entry for entry in logs}
    assert by_event["activity_answer_rejected"]["activity_key"] == handles[0].key
    assert by_event["activity_answer_rejected"]["answer"] == A.COMPLETE
    assert by_event["activity_result_dropped"]["activity_key"] == handles[1].key
    assert by_event["activity_result_dropped"]["reason"] == "ATTEMPT_OVER"


def test_invalid_arguments_are_refused_by_the_client_and_by_the_engine_alike(env):
    expected = ("a valid StartToCloseTimeout or ScheduleToCloseTimeout must be set on the activity. "
                "ActivityId=bad-1 ActivityType=charge")
    with pytest.raises(activity.InvalidArgument, match="^" + expected.replace(".", r"\.") + "$"):
        env.activities.schedule_activity("charge", task_queue=QUEUE, activity_id="bad-1",
                                         start_to_close_timeout="NONE")
    with pytest.raises(activity.InvalidArgument, match="MaximumAttempts cannot be negative on retry policy."):
        env.schedule("charge", retry_policy=RetryPolicy(maximum_attempts=-1))

    # The same commands written by hand, past the client's checks: the engine says the same.
    raw = [{"activity_id": "bad-1", "activity_type": "charge", "task_queue": QUEUE, "input": "[]"},
           {"activity_id": "bad-2", "activity_type": "charge", "task_queue": QUEUE, "input": "[]",
            "start_to_close_timeout_ms": 1000, "retry_policy": {"maximum_attempts": -1}}]
    for value in raw:
        env.client.send(Record.command("ACTIVITY_TASK", A.SCHEDULE, value, request_id=value["activity_id"]),
                        partition_for(value["activity_id"], env.client.partitions))
    env.client.flush()
    env.events.read_until(lambda e: len(e.rejections()) == 2, timeout=30)
    reasons = {r.request_id: r.rejection_reason for r in env.events.rejections()}
    assert reasons == {"bad-1": expected, "bad-2": "MaximumAttempts cannot be negative on retry policy."}
    assert {r.rejection_type for r in env.events.rejections()} == {"INVALID_ARGUMENT"}

    env.schedule("charge", activity_id="twice")
    with pytest.raises(activity.ActivityAlreadyStartedError, match="ActivityId=twice"):
        env.schedule("charge", activity_id="twice")


def test_a_worker_with_every_slot_taken_keeps_taking_tasks_as_slots_free(env):
    """A full worker pauses its partitions and resumes them when a slot frees. The
    consumer used to notice a resume only about a second later, so a worker whose slots
    were all taken ran one batch of tasks a second: 40 tasks through one slot took 40 s."""
    @activity.defn
    def echo(n: int) -> int:
        return n

    with env.worker(echo, max_concurrent=1) as worker:
        handles = [env.schedule(echo, n) for n in range(40)]
        deadline = time.monotonic() + 20
        assert [h.result(max(0.1, deadline - time.monotonic())) for h in handles] == list(range(40))
    assert worker.stats.completed == 40


def test_a_worker_holds_its_answers_while_attempts_run_and_no_longer(env):
    """Answers of attempts that end while another runs wait for it (or the producer's 5 ms
    linger) to leave together; once none runs, nothing is held (`kafka/quiet_flush.py`)."""
    release = threading.Event()

    @activity.defn
    def slow() -> str:
        release.wait(30)
        return "slow"

    @activity.defn
    def fast() -> str:
        return "fast"

    with env.worker(slow, fast) as worker:
        slow_handle = env.schedule(slow)
        deadline = time.monotonic() + 30
        while worker.client.sends_held != 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert worker.client.sends_held == 1  # the slow attempt runs
        assert env.schedule(fast).result(30) == "fast"  # its answer left, within the linger
        release.set()
        assert slow_handle.result(30) == "slow"
        while worker.client.sends_held and time.monotonic() < deadline:
            time.sleep(0.01)
        assert worker.client.sends_held == 0
