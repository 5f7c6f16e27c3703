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

from collections.abc import Callable

import structlog
from confluent_kafka import KafkaError, KafkaException, Producer

from streamproc.settings import ENGINE_ID_SEPARATOR

log = structlog.get_logger("streamproc.engine")


def transactional_ids(base: str) -> list[str]:
    """The ids of the two producers: `base` itself (so an engine of an earlier version
    with the same id is fenced too) and `base#2`."""
    return [base, f"{base}{ENGINE_ID_SEPARATOR}2"]


class TransactionalProducers:
    def __init__(self, base_id: str, config: Callable[[str], dict]) -> None:
        """`config(transactional_id)` gives a producer's configuration."""
        self._ids = transactional_ids(base_id)
        self._config = config
        self._producers: list[Producer | None] = [None, None]
        #: Index of the producer whose transaction began last.
        self._turn = 1

    def open(self) -> None:
        for i in range(len(self._ids)):
            self._open(i)

    def _open(self, i: int) -> None:
        producer = Producer(self._config(self._ids[i]))
        # Aborts whatever a previous incarnation with this id left open, and fences it.
        producer.init_transactions(60)
        self._producers[i] = producer

    def begin(self) -> Producer:
        """Begin the next transaction, on the producer whose turn it is."""
        self._turn = 1 - self._turn
        producer = self._producers[self._turn]
        producer.begin_transaction()
        return producer

    def abort(self, fatal: bool) -> None:
        """Abort the transaction that began last, if it is still open; a producer left in a
        fatal state (fenced, say) is replaced: only init_transactions lets one go on."""
        i = self._turn
        if not fatal:
            try:
                self._producers[i].abort_transaction(30)
            except KafkaException as abort_error:
                # _STATE: no transaction was open (the failure came before one began,
                # e.g. while a partition was being opened): nothing to abort.
                if abort_error.args[0].code() != KafkaError._STATE:
                    log.error("transaction_abort_failed", error=str(abort_error))
                    fatal = True
        if fatal:
            self._producers[i] = None
            self._open(i)
        for producer in self._producers:
            producer.poll(0)  # an aborted batch's purge reports must not fail the next one

    def close(self) -> None:
        self._producers = [None, None]
