"""The Kafka shell around the partition processors: consume, process, commit, recover.

One engine process owns the partitions the `engine` consumer group gives it. Its loop
consumes a batch of commands, runs each partition's processor, and commits everything
in one Kafka transaction: the exactly-once contract is the numbered list in
`streamproc.kafka.commit`. Only then is local RocksDB written, with the changelog offset it reflects, so
a crash at any point leaves either the old state and old offsets or the new ones. The
commit runs on a background thread while the loop processes the next batch over the
committing one's writes; the next transaction begins once the previous one is done.

Nothing here waits on Kafka without a bound, and any failure (a broker restart is an
ordinary one) is answered by rewinding to the last commit and trying again, with new
clients where the old ones are dead: `streamproc.kafka.recovery` decides, and
`streamproc.kafka.watchdog` reports a loop that stopped making progress.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import structlog
from confluent_kafka import Consumer, Message, TopicPartition

from streamproc.clock import Clock, SystemClock
from streamproc.due.waiting import Outlook
from streamproc.export.schema_registry import event_framing
from streamproc.kafka.changelog import restore
from streamproc.kafka.engine_clients import RECONNECT, engine_producer_config
from streamproc.kafka.engine_consumer import EngineConsumer
from streamproc.kafka.engine_stats import EngineStats
from streamproc.kafka.commit import Committer
from streamproc.kafka.commit_window import CommitWindow
from streamproc.kafka.committed_offsets import CommittedOffsets
from streamproc.engine.processing import Limits
from streamproc.engine.relay import Relay
from streamproc.kafka.recovery import FaultPolicy, Recovery
from streamproc.kafka.transactions import TransactionalProducers
from streamproc.kafka.watchdog import Progress, Watchdog
from streamproc.kafka.admin import TopicAdmin
from streamproc.kafka.quiet import quiet_outlook
from streamproc.kafka.client_log import ClientLog
from streamproc.kafka.connection import BrokerProbe, check_connection
from streamproc.kafka.echoes import EchoOffsets
from streamproc.kafka.due_commands import collect_due, commands_count, process_due
from streamproc.kafka.read_commands import process_read
from streamproc.kafka.relay_catch_up import RelayCatchUp
from streamproc.kafka.owned_partition import RESTORE_CONNECT_TIMEOUT_S, OwnedPartition, open_restored
from streamproc.kafka.errors import IdentityConflict, StartRefused
from streamproc.metrics.batch_tally import BatchTally
from streamproc.metrics.engine_metrics import EngineMetrics
from streamproc.protocol.records import Record
from streamproc.protocol.topics import Topics
from streamproc.settings import Settings
from streamproc.state.db import PartitionDb

log = structlog.get_logger("streamproc.engine")


class Engine:
    def __init__(self, settings: Settings, clock: Clock | None = None, limits: Limits = Limits(),
                 max_batch: int = 2000, idle_poll_ms: int = 100,
                 transaction_timeout_ms: int = 10_000, echo_offsets_max_age_s: float = 1.0,
                 faults: FaultPolicy = FaultPolicy(), metrics: EngineMetrics | None = None,
                 commit_interval_ms: float = 0) -> None:
        self.settings = settings
        self.topics = Topics(settings.namespace)
        self.clock = clock or SystemClock()
        self.limits = limits
        self.max_batch = max_batch
        self.idle_poll_ms = idle_poll_ms
        self.transaction_timeout_ms = transaction_timeout_ms
        #: Offsets of our own due commands read back from the log ride with the next
        #: transaction; when none comes, they are committed after this long (read again
        #: after a crash, they are skipped anyway).
        self.echo_offsets_max_age_s = echo_offsets_max_age_s
        self.stats = EngineStats()
        #: Transactions begin at most every `commit_interval_ms` (`kafka/commit_window.py`).
        self._window = CommitWindow(commit_interval_ms)
        self.partitions: dict[int, OwnedPartition] = {}
        self.ready = threading.Event()
        self._stop = threading.Event()
        self._state_root = settings.state_dir / settings.engine_id
        self.partition_count: int | None = None
        self._rebuild_producer = False
        self._rebuild_producers = False
        # Settings or credentials the cluster refuses: StartRefused now, not retried forever.
        check_connection(settings.bootstrap)
        self._client_log = ClientLog("engine", faults.stall_log_interval_s * 2)
        self._session = EngineConsumer(settings, self.topics, self._client_log, self._on_assign, self._on_revoke)
        self._admin = TopicAdmin(settings.bootstrap, self.topics, {**RECONNECT, **self._client_log.config()})
        self._producers = TransactionalProducers(
            f"{settings.namespace}.engine.{settings.engine_id}", self._producer_config)
        # Events in the registry's wire format when one is configured: its schema id, once.
        self._txn = Committer(self.topics, self._admin, self._producers,
                              transaction_timeout_ms / 1000 + faults.commit_margin_s,
                              event_framing(settings.schema_registry_url, self.topics.events))
        self._echo_offsets = EchoOffsets()
        self._committed_offsets = CommittedOffsets()  # sent again by transactions that consumed nothing
        self._relay_catch_up = RelayCatchUp()  # when a held partition may be relayed to again
        self.progress = Progress()
        self._recovery = Recovery(settings.engine_id, self.progress, faults, transaction_timeout_ms / 1000)
        self._watchdog = Watchdog(self.progress, lambda: sorted(self.partitions), faults,
                                  broker_answers=BrokerProbe(settings.bootstrap))
        #: Why run() ended, if not by stop(): another live process has this engine's id.
        self.failure: IdentityConflict | None = None
        self.on_batch_committed: Callable[[int], None] | None = None
        #: Called on the engine thread after a step that read nothing and has nothing to
        #: commit (the time-skipping test environment looks at `quiet_outlook` then).
        self.on_idle: Callable[[], None] | None = None
        #: Prometheus metrics (None: off). A batch's tally is added once it committed.
        self.metrics = metrics
        self._tally: BatchTally | None = None if metrics is None else BatchTally()
        self._committing_tally: BatchTally | None = None
        if metrics is not None:
            metrics.watch(lambda: {pid: part.db.path for pid, part in list(self.partitions.items())})
        #: Partitions the group assigned us (None: no assignment yet); replaced, never changed
        #: in place, so that `restored` may read it from another thread.
        self._assigned: frozenset[int] | None = None
        self._running = True

    # lifecycle ----------------------------------------------------------------------------
    def run(self) -> None:
        """Process until `stop()`. A failure aborts the transaction and rewinds the owned
        partitions to their last commit, then the loop goes on (see `_reconnect`); it ends
        only for `IdentityConflict`, which is raised."""
        self._watchdog.start()
        try:
            while not self._stop.is_set():
                try:
                    if self._recovery.pending:
                        if not self._recovery.wait(self._stop):
                            break
                        self._reconnect()
                    self._step()
                except (IdentityConflict, StartRefused):
                    raise
                except Exception as exc:  # noqa: BLE001 - every failure is rewound (see recovery.py)
                    self._failed(exc)
        except IdentityConflict as exc:
            self.failure = exc
            log.error("engine_identity_conflict", error=str(exc))
            raise
        except StartRefused as exc:
            log.error("engine_start_refused", error=str(exc))
            raise
        finally:
            self._running = False
            self._watchdog.stop()
            self._close_session()
            log.info("engine_stopped", **self.stats.summary())

    def stop(self) -> None:
        self._stop.set()

    def log_stats(self) -> None:
        """One `engine_stats` line with the counters so far (a benchmark reads the
        transactions committed over its measured window from two of them)."""
        log.info("engine_stats", **self.stats.summary())

    # health -------------------------------------------------------------------------------
    def alive(self) -> bool:
        """Liveness: `run()` has not ended (a broker outage is waited out, not a death)."""
        return self._running

    def restored(self) -> bool:
        """Readiness: the group assigned us partitions (maybe none) and every one is restored."""
        assigned = self._assigned
        return assigned is not None and all(pid in self.partitions for pid in assigned)

    @property
    def _consumer(self) -> Consumer | None:
        return self._session.consumer

    def _producer_config(self, transactional_id: str) -> dict:
        return engine_producer_config(self.settings, transactional_id, self.transaction_timeout_ms,
                                      self._client_log.config())

    def _failed(self, exc: Exception) -> None:
        """Settle the commit in flight and note what must be rebuilt; `_reconnect` follows."""
        self._txn.settle()
        if self._tally is not None:  # both batches are processed again after the rewind
            self._tally, self._committing_tally = BatchTally(), None
        decision = self._recovery.failed(exc, self._producers.age_s(), sorted(self.partitions),
                                         connected_s=time.monotonic() - self._session.brokers_lost_at)
        self._rebuild_producer |= decision.producer
        self._rebuild_producers |= decision.producers
        self._session.dead |= decision.consumer

    def _reconnect(self) -> None:
        """Connect (at start) or undo a failed batch: abort it, replace dead clients, reopen
        the owned partitions from their committed local state and the changelog, and seek
        to the committed offsets.

        The consumer is kept unless it is dead. A rebalance makes the offsets' group
        generation stale (ILLEGAL_GENERATION), and that is the common cause here; a new
        consumer with our static instance id would rejoin without a rebalance, so the
        partitions this one was giving up mid-rebalance would stay unassigned.
        The producers come first: init_transactions of a new one settles whatever its
        predecessor left open, so the changelog read below is the whole committed truth.
        """
        p = self.progress
        p.stage = "reconnect"
        if self.partition_count is None:
            partition_count = self._admin.ensure_engine_topics(self.settings.partitions)
            self._txn.connect(partition_count)
            self.partition_count = partition_count
            self._txn.relay = self._relay = Relay(partition_count)
        if p.rebuild_requested:  # the watchdog's: every client new
            p.rebuild_requested = False
            self._rebuild_producers = self._session.dead = True
        rebuild_producer, self._rebuild_producer = self._rebuild_producer, False
        rebuild_producers, self._rebuild_producers = self._rebuild_producers, False
        self._producers.recover(rebuild_producer, rebuild_producers)
        if self._session.needs_replacing():
            self._replace_consumer()
        self._txn.writer.reset()
        # What the group assigned us, not only what we opened: an assignment whose opening
        # failed half way (the broker was still electing a changelog leader, say) is
        # finished here, or the unopened partitions would never be processed.
        owned = sorted({*self.partitions, *self._session.assigned()})
        for pid in owned:
            self._close_partition(pid)
            self._open_partition(pid)
        if owned and not self.ready.is_set():
            log.info("partitions_assigned", assigned=owned, owned=owned)
            self.ready.set()
        for pid in self._session.seek_to_committed(owned):  # not ours any more: let it go
            self._close_partition(pid)
        self._recovery.reconnected()
        p.step_at = time.monotonic()

    def _replace_consumer(self) -> None:
        """Give up the owned partitions and replace the consumer (see `EngineConsumer.replace`)."""
        given_up = sorted(self.partitions)
        self._assigned = None  # until the new consumer's first assignment
        for pid in given_up:
            self._close_partition(pid)
        if given_up:  # the old consumer's revoke will never be heard: say it here
            log.info("partitions_revoked", revoked=given_up, owned=[], reason="consumer_replaced")
        self._session.replace()

    def _close_session(self) -> None:
        try:
            self._finish_commit()
        except Exception as exc:  # noqa: BLE001 - nothing more to do: the next owner restores from the log
            log.warning("last_commit_failed", error=str(exc))
        for pid in list(self.partitions):
            self._close_partition(pid)
        self._session.close()
        self._txn.shutdown()
        self._assigned = None
        self.ready.clear()

    # rebalance ----------------------------------------------------------------------------
    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if consumer is not self._consumer:
            return  # a replaced consumer, closing
        self._assigned = (self._assigned or frozenset()) | {tp.partition for tp in partitions}
        for tp in partitions:
            self._open_partition(tp.partition)
        log.info("partitions_assigned", assigned=sorted(p.partition for p in partitions),
                 owned=sorted(self.partitions))
        self.ready.set()

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if consumer is not self._consumer:
            return
        try:  # the commit in flight may hold these partitions' writes
            self._finish_commit()
        except Exception as exc:  # noqa: BLE001
            self._txn.failure = exc  # raised from the loop, which rewinds
        if self._assigned is not None:
            self._assigned = self._assigned - {tp.partition for tp in partitions}
        for tp in partitions:
            self._close_partition(tp.partition)
        log.info("partitions_revoked", revoked=sorted(p.partition for p in partitions),
                 owned=sorted(self.partitions))

    def _open_partition(self, pid: int) -> None:
        self.progress.stage = "restore"
        started = time.monotonic()
        db, applied = open_restored(self._state_root / f"partition-{pid}", pid, self._restore)
        seconds = time.monotonic() - started
        self.stats.restored(applied, seconds)
        self.partitions[pid] = OwnedPartition.over(db, self.clock, self.limits, self.settings.namespace)
        self._relay.hold_all()  # a partition (re)opened: what was written before may be on our logs
        log.info("partition_restored", partition=pid, records=applied, seconds=round(seconds, 3))

    def _restore(self, db: PartitionDb, pid: int) -> int:
        return restore(db, self.settings.bootstrap, self.topics.changelog, pid, self.clock.now_ms(),
                       connect_timeout_s=RESTORE_CONNECT_TIMEOUT_S)

    def _close_partition(self, pid: int) -> None:
        part = self.partitions.pop(pid, None)
        self._echo_offsets.drop(pid)  # not ours to commit any more; re-read, they are skipped
        self._committed_offsets.drop(pid)
        if part is not None:
            part.db.close()

    # processing ---------------------------------------------------------------------------
    def _poll_timeout_s(self) -> float:
        if self._txn.committing is not None:
            return 0  # take what has arrived and process it while the commit runs
        now = self.clock.now_ms()
        waits = [w for p in self.partitions.values() if (w := p.checker.wait_ms(now)) is not None]
        return min([self.idle_poll_ms, *waits]) / 1000

    def _step(self) -> None:
        """Process a batch while the previous one commits, then commit it (see `_begin_commit`)."""
        p = self.progress
        if p.rebuild_requested:
            raise RuntimeError("the watchdog asked for new Kafka clients")
        p.stage = "consume"
        messages, commands = self._session.poll_commands(self.max_batch, self._poll_timeout_s(), self.partitions)
        p.stage = "process"
        # 1. The commands read, processed (`read_commands.py`); what is left is read again.
        touched: set[int] = set()
        commands, fresh, processed = self._process_fresh(commands, touched, 0)
        # 2. The previous batch must have committed before this one's transaction begins; one
        #    ready within the commit interval of its begin takes in what arrives until then.
        p.stage = "commit_wait"
        self._finish_commit()
        while fresh and processed < self.max_batch and (left_s := self._window.left_s()) > 0:
            _, more = self._session.poll_commands(self.max_batch - processed, left_s, self.partitions)
            if not touched.union(m.partition() for m in commands) <= self.partitions.keys():
                # Revoked in that poll: its staged writes are gone, its offsets not ours to commit.
                raise RuntimeError("partitions revoked while a batch collected commands: rewinding")
            more, more_fresh, processed = self._process_fresh(more, touched, processed)
            commands, fresh = commands + more, fresh + more_fresh
        # 3. Due commands, processed in the transaction that writes them (`due_commands.py`);
        # 4. what each writes for our own partitions right after it, the rest after all (`engine/relay.py`).
        now_ms = self.clock.now_ms()
        due = collect_due(self.partitions, now_ms)
        processed += commands_count(due)
        p.stage = "relay"
        self._relay_catch_up.check(self._relay, self._consumer, self.topics.commands, self.partitions)
        self._relay.begin({pid: part.processor for pid, part in self.partitions.items()}, touched,
                          max(self.max_batch, processed))
        process_due(due, self.partitions, now_ms, touched, self._tally, after_each=lambda: self._relay.relay(touched))
        relayed = self._relay.relay(touched)
        if due or fresh or touched:  # touched alone: our commands the log has not given back yet
            self._begin_commit(commands, touched, due, relayed)
        elif commands:  # only echoes: a transaction just to move their offsets would delay the next command
            self._echo_offsets.hold(commands)
        elif self._echo_offsets.older_than(self.echo_offsets_max_age_s):
            self._begin_commit([], set(), [])
        elif self.on_idle is not None and self._txn.committing is None:
            self.on_idle()
        p.step_at = time.monotonic()

    def _process_fresh(self, commands: list[Message], touched: set[int], processed: int) \
            -> tuple[list[Message], int, int]:
        """Step 1 on a poll's commands, up to `max_batch` in all (what is beyond is put back);
        answers the commands kept, how many were fresh, and the count processed so far."""
        read = process_read(commands, self.partitions, self._relay, self.max_batch - processed,
                            self._tally, self.stats)
        touched |= read.touched
        if read.left:
            commands = self._session.put_back(read.left, commands)
        return commands, len(read.fresh) - len(read.left), processed + read.processed

    def quiet_outlook(self) -> Outlook | None:
        """From `on_idle` only (the engine thread): see `streamproc.kafka.quiet`."""
        return quiet_outlook(self.partitions, self.restored(), self._consumer, self.topics.commands)

    def _begin_commit(self, messages: list[Message], touched_ids: set[int],
                      due: list[tuple[int, Record]], relayed: list[tuple[int, Record]] = ()) -> None:
        """Write the batch in a transaction and start committing it in the background; see
        `streamproc.kafka.commit` for the exactly-once contract. Local RocksDB is written only
        once it committed (`_finish_commit`), with the changelog offset it reflects."""
        offsets = self._echo_offsets.take()  # read again after a failure, echoes are skipped anyway
        for msg in messages:
            offsets[msg.partition()] = msg.offset() + 1
        offsets = self._committed_offsets.for_transaction(offsets)  # fenced by the group generation
        self.progress.stage = "commit_begin"
        if self._session.brokers_lost:
            self._session.brokers_lost = False
            self._producers.recover(False, rebuild_all=True)
        if self._tally is not None:
            for pid in touched_ids:
                self._tally.rejections_in(pid, self.partitions[pid].processor.output.events)
            self._tally.relayed(relayed)
            self._committing_tally, self._tally = self._tally, BatchTally()
        self._window.began()
        self._txn.begin(offsets, [self.partitions[pid] for pid in touched_ids], due, len(messages),
                        self._consumer.consumer_group_metadata, len(relayed))

    def _finish_commit(self) -> None:
        """Wait for the batch in flight, if any; write it to RocksDB once committed."""
        committing = self._txn.finish()  # a failed commit raises here; the loop rewinds
        if committing is None:
            return
        self._committed_offsets.committed()
        if self.progress.failing_since is not None:
            self._recovery.committed()
        now = self.clock.now_ms()
        for part in committing.touched:
            part.changelog_offset = committing.writer.changelog_offsets.get(part.id, part.changelog_offset)
            part.db.apply(part.processor.writes.committing,
                          {"changelog_offset": part.changelog_offset, "written_at_ms": now})
            part.processor.writes.committed()
            part.checker.refresh()
        self.stats.committed(committing.messages, committing.due, committing.relayed)
        if self._committing_tally is not None:
            self.metrics.committed(self._committing_tally, committing.commit_seconds)
            self._committing_tally = None
        if self.on_batch_committed is not None:
            self.on_batch_committed(committing.messages)
