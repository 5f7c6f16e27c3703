"""The engine's transactional producers: two of them, taking turns.

A transaction begun right after the previous one committed can reach the coordinator
while it is still writing that one's commit markers (a fraction of a millisecond). Its
AddPartitionsToTxn is then answered CONCURRENT_TRANSACTIONS, and librdkafka retries that
request only after a fixed 20 ms (`retry.backoff.ms` does not apply to it): in a loop of
back-to-back transactions about 2% took 22-25 ms instead of 2-4 ms. The engine begins a
transaction as soon as the previous one committed and RocksDB was written, which meets
the race less often, but whatever waits for such a transaction (a due timer, a job's next
step) waits as long.

Two transactional ids used in turn never meet it: the transaction a producer begins
follows its own previous one by a whole transaction of the other. Still one transaction
at a time: the next one begins only after the previous one committed, as before.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

import structlog
from confluent_kafka import KafkaError, KafkaException, Producer

from streamproc.kafka.errors import ClientFailure, Origin, ProducerCallUnfinished, describe
from streamproc.settings import ENGINE_ID_SEPARATOR

log = structlog.get_logger("streamproc.engine")

#: Bounds of the producers' blocking calls. init_transactions waits for the transaction
#: coordinator (a broker that just restarted loads its state first); a call that times
#: out is retriable and is made again on the same producer, as librdkafka documents.
INIT_TIMEOUT_S = 10.0
ABORT_TIMEOUT_S = 5.0


def _unfinished(exc: KafkaException) -> bool:
    error = exc.args[0]
    return error.code() == KafkaError._TIMED_OUT and error.retriable() and not error.fatal()


def transactional_ids(base: str) -> list[str]:
    """The ids of the two producers: `base` itself (so an engine of an earlier version
    with the same id is fenced too) and `base#2`."""
    return [base, f"{base}{ENGINE_ID_SEPARATOR}2"]


class TransactionalProducers:
    """Two transactional producers taking turns; a dead one is replaced by a new instance.

    A slot is empty (None) until its producer is created, and not ready until its
    init_transactions succeeded: that call fences every earlier producer with the same
    transactional id (a previous process, or an instance of ours left blocked in a call)
    and aborts or completes what such a producer left open, so nothing it still does can
    reach the log. `ensure_open()` fills and initialises what is missing, and is called
    again after a failure until it succeeds.
    """

    def __init__(self, base_id: str, config: Callable[[str], dict]) -> None:
        """`config(transactional_id)` gives a producer's configuration."""
        self._ids = transactional_ids(base_id)
        self._config = config
        self._producers: list[Producer | None] = [None, None]
        self._ready = [False, False]
        #: monotonic time each producer's init_transactions succeeded
        self._init_at = [0.0, 0.0]
        #: Index of the producer whose transaction began last.
        self._turn = 1

    def open(self) -> None:
        self.ensure_open()

    def ensure_open(self) -> None:
        for i in range(len(self._ids)):
            if self._producers[i] is None:
                self._producers[i] = Producer(self._config(self._ids[i]))
                self._ready[i] = False
            if not self._ready[i]:
                try:
                    self._producers[i].init_transactions(INIT_TIMEOUT_S)
                except KafkaException as exc:
                    if _unfinished(exc):
                        raise ProducerCallUnfinished(exc) from exc
                    if not exc.args[0].retriable():  # fatal or fenced: only a new instance goes on
                        self._producers[i] = None
                    raise
                self._ready[i] = True
                self._init_at[i] = time.monotonic()

    def begin(self) -> tuple[int, Producer]:
        """Begin the next transaction, on the producer whose turn it is; returns its slot too."""
        self._turn = 1 - self._turn
        producer = self._producers[self._turn]
        producer.begin_transaction()
        return self._turn, producer

    def age_s(self, slot: int | None = None) -> float:
        """Seconds since the producer of `slot` (default: the last to begin) was initialised."""
        return time.monotonic() - self._init_at[self._turn if slot is None else slot]

    def discard(self, slot: int) -> None:
        """Drop a producer that is dead or stuck in a call: `ensure_open` makes a new one,
        whose init_transactions fences this one. A thread blocked in it keeps it alive
        until its call returns, with an error: the epoch it writes with is stale."""
        self._producers[slot] = None
        self._ready[slot] = False

    def abort(self, rebuild: bool) -> None:
        """Abort the transaction that began last, if it is still open; a producer whose abort
        fails, or that `rebuild` says is dead (fatal, fenced), is replaced. An abort that
        timed out raises ProducerCallUnfinished and is resumed by the next call."""
        i = self._turn
        producer = self._producers[i]
        if producer is not None and self._ready[i] and not rebuild:
            try:
                producer.abort_transaction(ABORT_TIMEOUT_S)
            except KafkaException as abort_error:
                # _STATE: no transaction was open (the failure came before one began,
                # e.g. while a partition was being opened): nothing to abort.
                if _unfinished(abort_error):
                    raise ProducerCallUnfinished(abort_error) from abort_error
                if abort_error.args[0].code() != KafkaError._STATE:
                    log.warning("transaction_abort_failed", error=describe(abort_error))
                    rebuild = True
        if rebuild:
            self.discard(i)
        for producer in self._producers:
            if producer is not None:
                producer.poll(0)  # an aborted batch's purge reports must not fail the next one

    def recover(self, rebuild_last: bool, rebuild_all: bool = False) -> None:
        """After a failure: abort what began last (or replace it: `rebuild_last`), replace both
        (`rebuild_all`), and have two initialised producers again. Raises ClientFailure."""
        try:
            self.abort(rebuild_last or rebuild_all)
            if rebuild_all:
                self.discard(0)
                self.discard(1)
            self.ensure_open()
        except KafkaException as exc:
            raise ClientFailure(Origin.PRODUCER, exc) from exc

    def close(self) -> None:
        self._producers = [None, None]
        self._ready = [False, False]


class CommitThread:
    """Runs the commits, one at a time, on a daemon thread of their own.

    A commit blocked in the client past its time is left behind (`abandon`): later commits
    go to a new thread, and the old one ends when its call returns. Daemon, so a thread
    that never returns does not hold the process at exit either.
    """

    def __init__(self, name: str = "engine-commit") -> None:
        self._name = name
        self._queue: queue.SimpleQueue | None = None
        self._start()

    def _start(self) -> None:
        self._queue = queue.SimpleQueue()
        threading.Thread(target=_serve, args=(self._queue,), name=self._name, daemon=True).start()

    def submit(self, fn: Callable, *args) -> Future:
        future: Future = Future()
        self._queue.put((future, fn, args))
        return future

    def abandon(self) -> None:
        self._queue.put(None)  # the stuck thread exits once its call returns
        self._start()

    def shutdown(self) -> None:
        self._queue.put(None)


def _serve(jobs: queue.SimpleQueue) -> None:
    while (job := jobs.get()) is not None:
        future, fn, args = job
        if future.set_running_or_notify_cancel():
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # noqa: BLE001 - handed to whoever waits for the future
                future.set_exception(exc)
