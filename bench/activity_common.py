"""What the activity benchmarks share: SCHEDULE values, a scripted worker, topic readers.

The benchmarks drive the activity protocol directly, without an SDK: the bench sends
SCHEDULE to partition_for(activity_id), and a scripted worker (a thread of the bench
process) reads the attempts from tasks.<queue> (read_committed) and answers with START /
HEARTBEAT / COMPLETE commands to the activity's partition (partition_of_key). Commands
that carry a reply_partition get their answers (ATTEMPT_STARTED, HEARTBEAT_RECORDED,
rejections) on the replies topic, whose timestamp_ms is the engine's processing time.
"""

from __future__ import annotations

import heapq
import re
import threading
import time
import uuid
from collections.abc import Callable

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from bench.common import Bench, now_ms, peek, say
from streamproc.client import SyncClient
from streamproc.kafka.admin import TopicAdmin
from streamproc.kafka.batching import consume_available
from streamproc.kafka.config import consumer_config
from streamproc.protocol import codec
from streamproc.protocol.partitioning import partition_for, partition_of_key
from streamproc.protocol.records import ActivityIntent as A
from streamproc.protocol.records import Record, ValueType

ACT = ValueType.ACTIVITY_TASK
#: The replies partition the bench asks answers on (any partition works; one is enough).
REPLY_PARTITION = 0


def schedule_value(activity_id: str, queue: str, *, start_to_close_ms: int = 0, heartbeat_ms: int = 0,
                   schedule_to_close_ms: int = 0, schedule_to_start_ms: int = 0,
                   initial_interval_ms: int = 1000, backoff_coefficient: float = 1.0,
                   maximum_interval_ms: int = 0, maximum_attempts: int = 0) -> dict:
    return {
        "activity_id": activity_id, "activity_type": "bench", "task_queue": queue,
        "input": '{"bench": true}',
        "schedule_to_close_timeout_ms": schedule_to_close_ms,
        "schedule_to_start_timeout_ms": schedule_to_start_ms,
        "start_to_close_timeout_ms": start_to_close_ms, "heartbeat_timeout_ms": heartbeat_ms,
        "retry_policy": {"initial_interval_ms": initial_interval_ms, "backoff_coefficient": backoff_coefficient,
                         "maximum_interval_ms": maximum_interval_ms, "maximum_attempts": maximum_attempts,
                         "non_retryable_error_types": []},
    }


def send_schedule(client: SyncClient, value: dict) -> str:
    """SCHEDULE to the partition of the activity id; returns the request id its events carry."""
    request_id = uuid.uuid4().hex
    client.send(Record.command(ACT, A.SCHEDULE, value, request_id=request_id),
                partition_for(value["activity_id"], client.partitions))
    return request_id


def send_command(client: SyncClient, intent: str, key: int, reply: bool = False, **value) -> None:
    """START / HEARTBEAT / COMPLETE / FAIL about an existing activity, to the partition of its key."""
    client.send(Record.command(ACT, intent, value, key=key,
                               reply_partition=REPLY_PARTITION if reply else -1), partition_of_key(key))


class Reader:
    """A read_committed reader of some partitions of a topic, from the beginning or the end.

    Keeps the raw values and counts by (record type, intent); decodes on demand. Polls
    with consume_available, so a poll returns as soon as something arrived.
    """

    def __init__(self, bench: Bench, topic: str, partitions: list[int], from_end: bool = False) -> None:
        self._consumer = Consumer(consumer_config(bench.bootstrap, None, **{
            "group.id": f"{bench.namespace}.bench-reader.{uuid.uuid4().hex}",
            "queued.max.messages.kbytes": 262144}))
        starts = {p: OFFSET_BEGINNING for p in partitions}
        if from_end:  # the high watermark: for read_committed, past the last committed record
            starts = {p: self._consumer.get_watermark_offsets(TopicPartition(topic, p), 10)[1] for p in partitions}
        self._consumer.assign([TopicPartition(topic, p, off) for p, off in starts.items()])
        self.raw: list[bytes] = []
        self.counts: dict[tuple[str, bytes], int] = {}

    def poll(self, timeout: float = 0.05) -> list[bytes]:
        new = []
        for msg in consume_available(self._consumer, 10_000, timeout):
            if msg.error() is not None:
                continue
            value = msg.value()
            new.append(value)
            kind = peek(value)
            self.counts[kind] = self.counts.get(kind, 0) + 1
        self.raw.extend(new)
        return new

    def count(self, intent: str, record_type: str = "EVENT") -> int:
        return self.counts.get((record_type, intent.encode()), 0)

    def wait(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = now_ms() + timeout * 1000
        while not predicate():
            if now_ms() > deadline:
                raise TimeoutError(f"{what} not reached within {timeout} s; counts {self.summary()}")
            self.poll()

    def decode(self, *intents: str, record_type: str | None = None) -> list[Record]:
        wanted = {i.encode() for i in intents}
        out = []
        for v in self.raw:
            rt, intent = peek(v)
            if (not wanted or intent in wanted) and (record_type is None or rt == record_type):
                out.append(codec.decode(v, codec.AVRO_HEADERS))
        return out

    def summary(self) -> dict[str, int]:
        return {f"{rt}:{intent.decode()}": n for (rt, intent), n in sorted(self.counts.items())}

    def rejections(self) -> dict[str, int]:
        """Rejections by intent, type and reason (numbers replaced by N, so alike ones group)."""
        out: dict[str, int] = {}
        for r in self.decode(record_type="COMMAND_REJECTION"):
            reason = re.sub(r"\d+", "N", r.rejection_reason or "")[:160]
            name = f"{r.intent} {r.rejection_type}: {reason}"
            out[name] = out.get(name, 0) + 1
        return out

    def forget(self) -> None:
        self.raw.clear()
        self.counts.clear()

    def close(self) -> None:
        self._consumer.close()


#: What a scripted worker does with an attempt: (task record, worker) -> None.
TaskHandler = Callable[[Record, "ScriptedWorker"], None]


class ScriptedWorker(threading.Thread):
    """Reads every attempt published on tasks.<queue> and hands it to `on_task` at once.

    `later(delay_ms, fn)` runs fn on this thread after a delay (e.g. a heartbeat). Keeps
    (received at, task record) for every attempt it saw.
    """

    def __init__(self, bench: Bench, queue: str, partitions: int, on_task: TaskHandler) -> None:
        super().__init__(name=f"scripted-worker-{queue}", daemon=True)
        self.client = SyncClient(bench.bootstrap, bench.namespace)
        topic = TopicAdmin(bench.bootstrap, bench.topics).ensure_task_queue(queue, partitions)
        self._reader = Reader(bench, topic, list(range(partitions)))
        self.queue = queue
        self.on_task = completes_warmups(on_task)
        self.tasks: list[tuple[float, Record]] = []
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = 0
        self._stopping = threading.Event()
        self.error: BaseException | None = None

    def later(self, delay_ms: float, fn: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._timers, (now_ms() + delay_ms, self._seq, fn))

    def run(self) -> None:
        try:
            while not self._stopping.is_set():
                timeout = 0.05
                if self._timers:
                    timeout = max(0.0, min(timeout, (self._timers[0][0] - now_ms()) / 1000))
                for value in self._reader.poll(timeout):
                    received = now_ms()
                    task = codec.decode(value, codec.AVRO_HEADERS)
                    self.tasks.append((received, task))
                    self.on_task(task, self)
                while self._timers and self._timers[0][0] <= now_ms():
                    heapq.heappop(self._timers)[2]()
        except BaseException as exc:  # noqa: BLE001 - reported by the bench thread
            self.error = exc
            say("scripted worker failed:", repr(exc))

    def check(self) -> None:
        if self.error is not None:
            raise RuntimeError(f"scripted worker failed: {self.error!r}") from self.error

    def close(self) -> None:
        self._stopping.set()
        self.join(10)
        self._reader.close()
        self.client.close()


#: Activities completed before a measurement (ids prefixed "warmup-"): the first records
#: on a new task topic and partition pay for topic metadata and AddPartitionsToTxn, which
#: would queue the first schedules up and turn an evenly spread load into bursts.
WARMUP_ACTIVITIES = 16


def warm_up(client: SyncClient, worker: ScriptedWorker, events: Reader, replies: Reader | None = None) -> None:
    """Schedule WARMUP_ACTIVITIES on the worker's queue, wait until they completed, then
    forget what they left in the readers and the worker."""
    for i in range(WARMUP_ACTIVITIES):
        send_schedule(client, schedule_value(f"warmup-{i}", worker.queue, start_to_close_ms=10_000))
    client.flush()
    events.wait(lambda: events.count(A.COMPLETED) >= WARMUP_ACTIVITIES or worker.error is not None, 60,
                f"{WARMUP_ACTIVITIES} warm-up activities completed")
    worker.check()
    for reader in (events, replies):
        if reader is not None:
            reader.poll(0.2)
            reader.forget()
    worker.tasks.clear()


def completes_warmups(on_task: TaskHandler) -> TaskHandler:
    """`on_task`, except that warm-up attempts are started and completed at once."""
    def handle(task: Record, worker: ScriptedWorker) -> None:
        if not task.value["activity_id"].startswith("warmup-"):
            on_task(task, worker)
            return
        attempt = task.value["attempt"]
        send_command(worker.client, A.START, task.key, attempt=attempt, identity="bench")
        send_command(worker.client, A.COMPLETE, task.key, attempt=attempt, result="null")
    return handle


def timer_writes(bench: Bench, partitions: int) -> dict[tuple[str, int, int], tuple[int, int]]:
    """(intent, key, attempt) -> (timer_due_ms, write time) of the last TIME_OUT / DISPATCH the
    due-date checker wrote for it. The write time is the Kafka timestamp of the command
    (CreateTime: set when the engine produced it, after the checker collected it), so a
    timer's lag splits into "the checker wrote it" and "the command came back and was processed".
    """
    reader = Reader(bench, bench.topics.commands, list(range(partitions)))
    out: dict[tuple[str, int, int], tuple[int, int]] = {}
    wanted = {A.TIME_OUT.encode(), A.DISPATCH.encode()}
    idle = 0
    while idle < 2:  # caught up: two empty polls in a row
        msgs = consume_available(reader._consumer, 10_000, 0.5)
        idle = 0 if msgs else idle + 1
        for msg in msgs:
            if msg.error() is None and peek(msg.value())[1] in wanted:
                cmd = codec.decode(msg.value(), msg.headers())
                out[(cmd.intent, cmd.key, cmd.value["attempt"])] = (cmd.value["timer_due_ms"], msg.timestamp()[1])
    reader.close()
    return out


def by_key_attempt(records: list[Record]) -> dict[tuple[int, int], Record]:
    """The first record per (activity key, attempt)."""
    out: dict[tuple[int, int], Record] = {}
    for r in records:
        out.setdefault((r.key, r.value["attempt"]), r)
    return out


def stagger(index: int, count: int, over_ms: float) -> float:
    """Send time offset (ms) of the index-th of `count` activities spread evenly over `over_ms`."""
    return index * over_ms / count if count else 0.0


def schedule_staggered(client: SyncClient, count: int, over_ms: float, value_of) -> None:
    """SCHEDULE `count` activities spread evenly over `over_ms` (`value_of(i)`: the i-th
    command's value), then flush."""
    begin = time.monotonic()
    for i in range(count):
        delay = begin + stagger(i, count, over_ms) / 1000 - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        send_schedule(client, value_of(i))
    client.flush()
