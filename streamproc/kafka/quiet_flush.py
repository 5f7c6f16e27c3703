"""Send a producer's records once its sender pauses: a linger counted from the last record
sent, not from the first.

librdkafka holds a partition's batch `linger.ms` from its first record, then sends it, one
partition per produce request. A worker answers in bursts (the tasks one engine transaction
made readable, each answer a moment after the other as its activity or workflow task
ends); with a 1 ms linger such a burst left as one request per partition per millisecond,
and each request also woke the engine's fetch. Counted at 100 workflows in flight
(`docs/performance.md`, "What a workflow costs the broker, counted"), the clients'
produce requests were the largest share of the broker's requests after the engine's
transactions.

`QuietFlush` lets records wait while sends keep coming, and flushes the producer
`quiet_ms` after the last one (librdkafka's flush sends at once, whatever the linger). A
lone record so waits `quiet_ms`, as it waited `linger.ms` before; a burst goes out as one
request per partition once it ends, or when the producer's own `linger.ms`, now the cap,
runs out while sends still come.

A sender whose burst has pauses longer than `quiet_ms` (a worker whose attempts each run
a workflow task before answering) says so: between `hold()` and `release()` more sends
are coming, and nothing is flushed before the last hold is released (the cap still
applies). A worker holds while an attempt runs, so one at a time nothing changes. A
record its sender waits on the answer to (a START to confirm) is sent `urgent`: held
or not, it leaves after the pause.
"""

from __future__ import annotations

import threading
import time

from confluent_kafka import Producer

#: The pause after the last record that sends the batch: the 1 ms linger a lone record had.
QUIET_MS = 1.0
#: librdkafka's linger with a `QuietFlush`: how long a burst that does not pause may wait.
LINGER_CAP_MS = 5
#: How long a flush waits for the records it sends: enough for the producer's thread to
#: take them (a flush that returns first leaves them to the linger, the cap: so does a
#: producer's first record, sent before it has a connection); their delivery is the
#: sender's business (`Client.flush`).
_FLUSH_WAIT_S = 0.005


class QuietFlush:
    """Flushes `producer` `quiet_ms` after the last `sent()`, on a thread of its own."""

    def __init__(self, producer: Producer, quiet_ms: float = QUIET_MS) -> None:
        self._producer = producer
        self._quiet_s = quiet_ms / 1000
        self._cond = threading.Condition()
        #: When the last record not yet flushed was sent (monotonic); None: none waits.
        self._last: float | None = None
        #: Senders that said more sends are coming (`hold`).
        self._holds = 0
        #: A record sent since the last flush is waited on: the holds do not keep it.
        self._urgent = False
        self._closed = False
        self._thread: threading.Thread | None = None

    def sent(self, urgent: bool = False) -> None:
        """A record was just handed to the producer (`urgent`: its sender waits on its answer)."""
        with self._cond:
            if self._closed:
                return
            waiting = self._last is not None
            self._last = time.monotonic()
            if urgent and not self._urgent:
                self._urgent = True
                waiting = False  # a flusher waiting on the holds must look again
            if self._thread is None:  # started at the first record: a client that never sends has no thread
                self._thread = threading.Thread(target=self._run, name="quiet-flush", daemon=True)
                self._thread.start()
            elif not waiting:
                self._cond.notify()

    @property
    def holds(self) -> int:
        """Holds not yet released."""
        with self._cond:
            return self._holds

    def hold(self) -> None:
        """More sends are coming: flush nothing before the matching `release`."""
        with self._cond:
            self._holds += 1

    def release(self) -> None:
        with self._cond:
            self._holds -= 1
            if self._holds == 0 and self._last is not None:
                self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(5)

    def _run(self) -> None:
        while True:
            with self._cond:
                # Each record sent meanwhile moves `_last` on, and the flush with it.
                while not self._closed and (self._last is None or self._held()
                                            or (left := self._last + self._quiet_s - time.monotonic()) > 0):
                    self._cond.wait(None if self._last is None or self._held() else left)
                if self._closed:
                    return
                self._last, self._urgent = None, False
            self._producer.flush(_FLUSH_WAIT_S)

    def _held(self) -> bool:
        return self._holds > 0 and not self._urgent
