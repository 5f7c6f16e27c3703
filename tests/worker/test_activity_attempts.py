"""One attempt on the worker, against a fake engine that answers at once (no broker):
what the worker sends, in which order, for each way an activity can end."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future

import orjson
import pytest

from streamproc import activity
from streamproc.activity.definition import ActivityDefinition
from streamproc.converter import DataConverter
from streamproc.protocol.records import ActivityIntent as A
from streamproc.protocol.records import Record, RecordType
from streamproc.worker.activity_attempt import ActivityAttempt as _Attempt
from streamproc.worker.activity_worker import WorkerStats
from streamproc.kafka.replies import Reply
from streamproc.worker.task_leases import OverdueAttempts

KEY = 42


class FakeEngine:
    """The parts of ActivityWorker an attempt uses; answers START and HEARTBEAT at once."""

    def __init__(self, *fns, start_rejected: bool = False, heartbeat_answer=None) -> None:
        self.definitions = {ActivityDefinition.of(f).name: ActivityDefinition.of(f) for f in fns}
        self.identity = "fake-worker"
        self.task_queue = "fake-queue"
        self.namespace = "fake-namespace"
        self.metrics = None
        self.data_converter = DataConverter.default()
        self.activity_executor = None  # plain activities run on the attempt's thread
        self.stats = WorkerStats()
        self.sent: list[tuple[str, dict]] = []
        self.replies = self
        self.partition = 0
        self._lock = threading.Condition()
        self._running: set = set()
        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._loop.run_forever, daemon=True).start()
        self._start_rejected = start_rejected
        self._heartbeat_answer = heartbeat_answer  # value -> (record_type, rejection_type, cancel_requested)
        self._futures: dict[str, Future] = {}
        self.overdue = OverdueAttempts()
        self._stop = threading.Event()

    def hands_over(self):
        return False

    def forget(self, request_id):
        self._futures.pop(request_id, None)

    def first_reply(self, request_id, ttl_s):
        self._futures[request_id] = Future()
        return self._futures[request_id]

    def send(self, key, intent, value, request_id=None, on_reply=None, ttl_s=600, urgent=False):
        self.sent.append((intent, value))
        if intent == A.START:
            record = (Record(RecordType.COMMAND_REJECTION, "ACTIVITY_TASK", A.START, value, key=key,
                             rejection_type="INVALID_STATE", rejection_reason="already started")
                      if self._start_rejected else
                      Record(RecordType.EVENT, "ACTIVITY_TASK", A.ATTEMPT_STARTED, {"started_time_ms": 5}, key=key))
            self._futures[request_id].set_result(Reply(record, 0))
        elif intent == A.HEARTBEAT and self._heartbeat_answer is not None:
            record_type, rejection, cancel = self._heartbeat_answer
            on_reply(Reply(Record(record_type, "ACTIVITY_TASK", A.HEARTBEAT_RECORDED,
                                  {"cancel_requested": cancel}, key=key, rejection_type=rejection), 0))

    def count(self, field: str) -> None:
        setattr(self.stats, field, getattr(self.stats, field) + 1)

    def run(self, activity_type: str, *args, heartbeat_timeout_ms: int = 2000,
            input_text: str | None = None) -> list[tuple[str, dict]]:
        task = Record(RecordType.EVENT, "ACTIVITY_TASK", A.ACTIVITY_TASK, {
            "activity_id": "a-1", "activity_type": activity_type, "task_queue": "q", "attempt": 1,
            "input": input_text or orjson.dumps(list(args)).decode(), "heartbeat_details": None,
            "first_scheduled_time_ms": 1, "scheduled_time_ms": 1, "schedule_to_close_timeout_ms": 0,
            "start_to_close_timeout_ms": 60_000, "heartbeat_timeout_ms": heartbeat_timeout_ms}, key=KEY)
        _Attempt(self, task).run()
        self._loop.call_soon_threadsafe(self._loop.stop)
        return self.sent


def intents(sent):
    return [intent for intent, _ in sent]


@activity.defn
def count_pages(pages: int) -> int:
    for page in range(pages):
        activity.heartbeat(page)
    return pages


def test_heartbeats_are_throttled_and_the_last_details_precede_the_result():
    sent = FakeEngine(count_pages).run("count_pages", 50)
    assert intents(sent) == [A.START, A.HEARTBEAT, A.HEARTBEAT, A.COMPLETE]
    assert [v["details"] for _, v in sent[1:3]] == ["[0]", "[49]"]
    assert sent[3][1] == {"attempt": 1, "result": "50"}
    assert sent[0][1] == {"attempt": 1, "identity": "fake-worker"}


def test_a_refused_start_runs_nothing():
    engine = FakeEngine(count_pages, start_rejected=True)
    assert intents(engine.run("count_pages", 3)) == [A.START]
    assert engine.stats.started == 0


def test_an_unknown_activity_type_fails_non_retryably_listing_the_known_ones():
    (_, (intent, value)) = FakeEngine(count_pages).run("nope")
    failure = value["failure"]
    assert intent == A.FAIL and failure["type"] == "NotFoundError" and failure["non_retryable"]
    assert failure["message"] == ("Activity function nope is not registered on this worker, "
                                  "available activities: count_pages")


@activity.defn
def unserialisable() -> object:
    return object()  # no JSON form (sets, dataclasses, datetimes have one)


def test_a_result_json_cannot_hold_fails_the_attempt():
    (_, (intent, value)) = FakeEngine(unserialisable).run("unserialisable")
    assert intent == A.FAIL and value["failure"]["type"] == "TypeError"


def test_input_in_an_encoding_this_worker_lacks_fails_the_attempt_without_running_it():
    unknown = '[{"metadata": {"encoding": "text/money"}, "data": "RVVSIDE="}]'
    sent = FakeEngine(count_pages).run("count_pages", input_text=unknown)
    assert intents(sent) == [A.START, A.FAIL]  # no heartbeat: the function never ran
    failure = sent[1][1]["failure"]
    assert failure["type"] == "PayloadEncodingError"
    assert "'text/money' has no converter" in failure["message"]


@activity.defn
def until_cancelled() -> str:
    while True:
        activity.heartbeat("waiting")


@activity.defn
async def until_cancelled_async() -> str:
    while True:
        activity.heartbeat("waiting")
        await asyncio.sleep(0.001)


@pytest.mark.parametrize("name", ["until_cancelled", "until_cancelled_async"])
def test_a_cancel_request_in_a_heartbeat_answer_ends_in_report_canceled(name):
    engine = FakeEngine(until_cancelled, until_cancelled_async,
                        heartbeat_answer=(RecordType.EVENT, None, True))
    sent = engine.run(name)
    assert intents(sent) == [A.START, A.HEARTBEAT, A.REPORT_CANCELED]
    assert engine.stats.canceled == 1


def test_a_refused_heartbeat_means_the_attempt_is_over_and_its_result_is_dropped():
    engine = FakeEngine(until_cancelled, heartbeat_answer=(RecordType.COMMAND_REJECTION, "NOT_FOUND", False))
    assert intents(engine.run("until_cancelled")) == [A.START, A.HEARTBEAT]
    assert engine.stats.dropped == 1
