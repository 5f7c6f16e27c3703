"""Read back everything the engine wrote to the events topic and check invariants over it."""

from __future__ import annotations

import collections
import time

from streamproc.client.events import EventReader
from streamproc.client.activities import CLOSE_INTENTS as ACTIVITY_CLOSE_INTENTS
from streamproc.protocol.records import RecordType


class EventLog:
    def __init__(self, bootstrap: str, namespace: str) -> None:
        self.reader = EventReader(bootstrap, namespace)
        self.records: list = []
        #: (partition, offset) of every record taken: a record read twice (a fetch retried
        #: across a broker restart) is still one record on the log.
        self._offsets_read: set[tuple[int, int]] = set()

    def _take(self, polled) -> None:
        for record, partition, offset in polled:
            if (partition, offset) not in self._offsets_read:
                self._offsets_read.add((partition, offset))
                self.records.append(record)

    def read_until(self, done, timeout: float) -> None:
        """Keep reading until `done(self)` is true; raises with a summary on timeout."""
        deadline = time.monotonic() + timeout
        while not done(self):
            if time.monotonic() > deadline:
                raise TimeoutError(f"events so far: {self.summary()}")
            self._take(self.reader.poll(0.2))

    def read_while_progressing(self, done, progress, stalled_s: float) -> float:
        """Keep reading until `done(self)` is true, for as long as it takes while
        `progress(self)` keeps changing; raises with a summary when it stays the same for
        `stalled_s`. A loaded machine makes the engine late, not wrong: waiting on
        progress instead of a fixed deadline still fails when something is never done.
        Answers the seconds it took."""
        began = last_change = time.monotonic()
        seen = progress(self)
        while not done(self):
            now = time.monotonic()
            if (current := progress(self)) != seen:
                seen, last_change = current, now
            elif now - last_change > stalled_s:
                raise TimeoutError(f"no progress for {stalled_s:.0f} s (at {seen!r}); events so far: {self.summary()}")
            self._take(self.reader.poll(0.2))
        return time.monotonic() - began

    def read_available(self) -> None:
        """Take what is there now, without waiting for more."""
        self._take(self.reader.poll(0.2))

    def read_to_end(self, timeout: float) -> None:
        """Read everything committed so far: up to the end offset, as of now, of every partition."""
        consumer = self.reader._consumer
        deadline = time.monotonic() + timeout
        while not consumer.assignment():  # the group has not given the partitions yet
            if time.monotonic() > deadline:
                raise TimeoutError("no events partition assigned")
            self._take(self.reader.poll(0.2))
        assigned = consumer.assignment()
        ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in assigned}

        def behind() -> bool:
            return any(ends[tp.partition] > 0 and tp.offset < ends[tp.partition] for tp in consumer.position(assigned))
        while behind():
            if time.monotonic() > deadline:
                raise TimeoutError(f"events not read to their end within {timeout} s: {self.summary()}")
            self._take(self.reader.poll(0.2))

    def events(self, value_type: str = "JOB", intent: str | None = None) -> list:
        return [r for r in self.records if r.record_type is RecordType.EVENT
                and r.value_type == value_type and (intent is None or r.intent == intent)]

    def activity_history(self, key: int, timeout: float) -> list:
        """Activity `key`'s events in order, once its close event was read."""
        def closed(log: EventLog) -> bool:
            return any(r.key == key and r.intent in ACTIVITY_CLOSE_INTENTS for r in log.events("ACTIVITY_TASK"))
        self.read_until(closed, timeout)
        return [r for r in self.events("ACTIVITY_TASK") if r.key == key]

    def rejections(self) -> list:
        return [r for r in self.records if r.record_type is RecordType.COMMAND_REJECTION]

    def pushed_jobs(self, since: int = 0) -> int:
        """Jobs of request id `job-N` (N >= `since`) started in their CREATE's command: a pushed
        STARTED carries the CREATE's request id, a START's carries the worker's."""
        return sum(1 for e in self.events(intent="STARTED")
                   if (e.request_id or "").startswith("job-") and int(e.request_id[4:]) >= since)

    def count(self, intent: str) -> int:
        return len(self.events(intent=intent))

    def count_value(self, value_type: str, intent: str) -> int:
        return len(self.events(value_type, intent))

    def summary(self) -> dict:
        c = collections.Counter(f"{r.record_type.value}:{r.intent}" for r in self.records)
        return dict(c)

    def duplicates(self) -> list:
        """Records written twice: the same answer to the same command (position) twice. A
        workflow's history events count by event id: one command may append several of one
        type (the signals buffered while a task was out, flushed by its completion)."""
        seen = collections.Counter((r.partition_id, r.source_position, r.record_type, r.value_type,
                                    r.intent, r.key, (r.value or {}).get("event_id")) for r in self.records)
        return [k for k, n in seen.items() if n > 1]

    def close(self) -> None:
        self.reader.close()


def assert_jobs_completed_once(events: EventLog, count: int) -> None:
    """`count` jobs created once each, every one completed exactly once, no event written twice."""
    created = collections.Counter(e.request_id for e in events.events(intent="CREATED"))
    assert len(created) == count and set(created.values()) == {1}, "a job was created twice or lost"
    keys = {e.key for e in events.events(intent="CREATED")}
    completed = collections.Counter(e.key for e in events.events(intent="COMPLETED"))
    assert set(completed) == keys, f"{len(keys - set(completed))} jobs never completed"
    assert set(completed.values()) == {1}, "a job completed twice"
    assert events.duplicates() == [], f"duplicated events: {events.duplicates()[:5]}"
