"""What keeps a task a worker took from being stranded: a confirmed START, and a worker that
gives its partitions up while it cannot run what they hold.

A task record is not a lease. Kafka hands a partition to one member of the queue's group
for as long as it polls, however stuck its handlers are, and a timed-out attempt is
republished on the same partition (tasks are routed by key). So two rules, shared by the
job and the activity worker:

1. **A task is settled only by the engine's answer to its START** (`confirm_start`):
   accepted or refused. Until then its offset is not committed (`TaskOffsets`), so a
   worker killed before its START landed leaves the task to the partition's next owner.
   A START with no answer is sent again, with the same request id, until an answer
   comes: during a broker outage the worker waits instead of giving the task up. The
   first answer decides (a copy that arrives after an accepted one is refused by the
   engine, and that refusal is ignored).

2. **A worker with an overdue attempt leaves the group** if another member can take its
   partitions (`OverdueAttempts` and `TaskQueueMembership`). An attempt still running past its deadline (the job's
   timeout, an activity's start-to-close or heartbeat timeout, counted from when the
   START was sent, so never later than the engine's) has been timed out by the engine,
   which republished the next attempt on a partition this worker owns. A worker that
   cannot finish what it started will not finish that one either: it unsubscribes, its
   partitions move to a healthy member within a rebalance (seconds, not
   `max.poll.interval.ms`), and it rejoins once no attempt of it is overdue. A healthy
   worker whose handler merely overran leaves the group for as long as it overruns;
   that is the price of never sending a retry back to a stuck worker.

Temporal's matching service has neither problem (it hands a task only to a poller with a
free slot, and a retry to whichever poller asks); on Kafka these two rules give the same
guarantee: every attempt either runs on a live worker or comes back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout

import structlog
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from streamproc.kafka.batching import close_in_background
from streamproc.kafka.config import admin_config
from streamproc.protocol.records import Record
from streamproc.kafka.replies import Reply, ReplyListener

log = structlog.get_logger("streamproc.worker")

#: How long a START waits for its answer before the same command is sent again.
START_RESEND_S = 5.0


def confirm_start(replies: ReplyListener, request_id: str, send: Callable[[], None],
                  stop: threading.Event, resend_s: float = START_RESEND_S) -> Reply | None:
    """Send a START (with `send`, which names `request_id` and our replies partition) and
    wait for the engine's first answer, sending it again every `resend_s` seconds while
    none comes. None when the worker stops first: the task stays unsettled."""
    answer: Future[Reply] = replies.first_reply(request_id, ttl_s=24 * 3600)
    copies = 0
    try:
        while not stop.is_set():
            if copies:
                log.warning("task_start_unanswered_resending", request_id=request_id, copies=copies,
                            waited_s=round(copies * resend_s, 1))
            send()
            copies += 1
            try:
                return answer.result(resend_s)
            except FutureTimeout:
                continue
        return None
    finally:
        if not answer.done():
            replies.forget(request_id)


class PendingStarts:
    """STARTs sent and not answered yet, without a thread waiting on each (a job worker has
    many in flight: one engine round trip each would otherwise bound its throughput).

    An answer arrives on the replies listener's thread and goes to the `on_answer` given
    with the START; `resend_due()`, called by the polling thread, sends again, with the
    same request id, every START unanswered for `resend_s`, and says so in one line.
    """

    def __init__(self, replies: ReplyListener, send: Callable[[Record], None], resend_s: float = START_RESEND_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._replies = replies
        self._send = send
        self._resend_s = resend_s
        self._clock = clock
        self._lock = threading.Lock()
        #: request id -> (the START, when its last copy was sent, copies sent)
        self._pending: dict[str, tuple[Record, float, int]] = {}

    def start(self, command: Record, on_answer: Callable[[Reply], None]) -> None:
        """Send `command` (a START naming a request id and our replies partition)."""
        request_id = command.request_id

        def answered(reply: Reply) -> bool:
            with self._lock:
                if self._pending.pop(request_id, None) is None:
                    return True  # a later copy's answer: the first one decided
            on_answer(reply)
            return True

        with self._lock:
            self._pending[request_id] = (command, self._clock(), 1)
        self._replies.expect(request_id, answered, ttl_s=24 * 3600)
        self._send(command)

    def resend_due(self) -> None:
        now = self._clock()
        with self._lock:
            due = [(rid, cmd, copies) for rid, (cmd, sent, copies) in self._pending.items()
                   if now - sent >= self._resend_s]
            for rid, cmd, copies in due:
                self._pending[rid] = (cmd, now, copies + 1)
        if due:
            log.warning("task_starts_unanswered_resending", starts=len(due), most_copies=max(c for _, _, c in due) + 1)
        for _, cmd, _ in due:
            self._send(cmd)

    def __len__(self) -> int:
        with self._lock:
            return len(self._pending)


class OverdueAttempts:
    """The attempts running on this worker, each with the time the engine gives up on it."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        #: attempt -> (monotonic deadline, what to call it in a log line)
        self._deadlines: dict[object, tuple[float, str]] = {}

    def begin(self, attempt: object, timeout_s: float | None, name: str, sent_at: float | None = None) -> None:
        """`attempt` started; the engine times it out `timeout_s` after its START was sent
        (`sent_at`, a `time.monotonic()` reading; default now). None: no deadline."""
        if timeout_s is None:
            return
        with self._lock:
            self._deadlines[attempt] = ((sent_at if sent_at is not None else self._clock()) + timeout_s, name)

    def extend(self, attempt: object, deadline: float) -> None:
        """A heartbeat moved the attempt's deadline (never past one already set further)."""
        with self._lock:
            if attempt in self._deadlines:
                _, name = self._deadlines[attempt]
                self._deadlines[attempt] = (deadline, name)

    def end(self, attempt: object) -> None:
        with self._lock:
            self._deadlines.pop(attempt, None)

    def overdue(self) -> list[str]:
        """Names of the attempts past their deadline."""
        now = self._clock()
        with self._lock:
            return sorted(name for deadline, name in self._deadlines.values() if now >= deadline)


class TaskQueueMembership:
    """Keeps the worker in the queue's consumer group unless one of its attempts is overdue
    and another member can take the partitions over.

    A lone worker stays: leaving would hand its partitions to nobody, and a retry it runs in
    another slot is better than none (as Temporal's worker would). Two workers that both
    have overdue attempts may take turns leaving; each checks again every `check_interval_s`.
    """

    def __init__(self, new_consumer: Callable[[], Consumer], overdue: OverdueAttempts,
                 subscribe: Callable[[Consumer], None], others_in_group: Callable[[Consumer], int | None], task_queue: str,
                 identity: str, check_interval_s: float = 5.0, log_interval_s: float = 30.0,
                 unassigned_rejoin_s: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._new_consumer = new_consumer
        #: The queue's consumer; replaced by a new one when rejoining does not bring it back.
        self.consumer = new_consumer()
        self._overdue = overdue
        self._subscribe = subscribe
        #: Members of the group other than this worker (None: unknown, e.g. the broker is away).
        self._others_in_group = others_in_group
        self._log = log.bind(task_queue=task_queue, worker=identity)
        self._check_interval_s = check_interval_s
        self._log_interval_s = log_interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._checked_at = float("-inf")
        self._others_seen: int | None = None
        self._logged_at = float("-inf")
        self._unassigned_rejoin_s = unassigned_rejoin_s
        #: Since when (clock) the member has had no partition; None while it has some.
        self._unassigned_since: float | None = None
        #: Rejoins in a row that brought no partition.
        self._rejoins_unassigned = 0
        self.member = False

    def join(self) -> None:
        self._subscribe(self.consumer)
        self.member = True

    def hands_over(self) -> bool:
        """Whether a task taken now is to be left unstarted for another member: an attempt
        is overdue and another member can have it (the worker is about to leave)."""
        return bool(self._overdue.overdue()) and bool(self._others())

    def may_take_tasks(self) -> bool:
        """Leave or rejoin the group as the attempts' deadlines say; whether to take tasks now.
        Called by the polling thread only (it alone subscribes and unsubscribes)."""
        stuck = self._overdue.overdue()
        if not stuck:
            if not self.member:
                self._log.info("worker_rejoining_group")
                self.join()
            else:
                self._rejoin_if_left_out()
            return True
        others = self._others()
        now = self._clock()
        if self.member and others:
            self._log.warning("worker_leaving_group_attempts_overdue", attempts=stuck[:10], overdue=len(stuck),
                              other_members=others)
            self.consumer.unsubscribe()  # revokes: settled offsets are committed, the rest redelivered
            self.member = False
            self._logged_at = now
        elif not self.member and others == 0:
            self._log.warning("worker_rejoining_group_alone", attempts=stuck[:10], overdue=len(stuck))
            self.join()
        elif now - self._logged_at >= self._log_interval_s:
            self._log.warning("worker_attempts_overdue", attempts=stuck[:10], overdue=len(stuck),
                              in_group=self.member, other_members=others)
            self._logged_at = now
        return self.member

    def _rejoin_if_left_out(self) -> None:
        """A member with no partition for `unassigned_rejoin_s` subscribes again, and if that
        brings none either, goes on with a new consumer. After broker restarts a worker's
        consumer was seen never getting back into its group: its requests to the group
        coordinator stayed queued on a connection librdkafka never re-established
        ("GroupCoordinator: Timed out 0 in-flight, 0 retry-queued, N out-queue"), and a
        rejoin queued behind them. A new consumer has new connections. A worker idle because
        the others hold every partition goes through the same steps: one cooperative
        rebalance per interval, which moves no partition that has an owner."""
        now = self._clock()
        if self.consumer.assignment():
            self._unassigned_since = None
            self._rejoins_unassigned = 0
            return
        if self._unassigned_since is None:
            self._unassigned_since = now
        elif now - self._unassigned_since >= self._unassigned_rejoin_s:
            if self._rejoins_unassigned == 0:
                self._log.warning("worker_rejoining_group_unassigned",
                                  seconds=round(now - self._unassigned_since, 1))
                self.consumer.unsubscribe()
            else:
                self._log.warning("worker_consumer_renewed_unassigned", rejoins=self._rejoins_unassigned,
                                  seconds=round(now - self._unassigned_since, 1))
                self._renew_consumer()
            self._rejoins_unassigned += 1
            self.join()
            self._unassigned_since = now

    def _renew_consumer(self) -> None:
        """Replace the consumer; the old one is closed on a thread of its own (a close can wait
        on the very connection that is stuck). It holds no partition, so nothing is lost."""
        old, self.consumer = self.consumer, self._new_consumer()
        close_in_background(old)

    def _others(self) -> int | None:
        """Other members of the group, asked at most once per check interval."""
        with self._lock:
            now = self._clock()
            if now - self._checked_at >= self._check_interval_s:
                self._checked_at = now
                self._others_seen = self._others_in_group(self.consumer)
            return self._others_seen


def join_task_queue(new_consumer: Callable[[], Consumer], topic: str, group: str, bootstrap: str,
                    overdue: OverdueAttempts, on_assign: Callable, on_revoke: Callable, task_queue: str,
                    identity: str) -> TaskQueueMembership:
    """Subscribe a consumer made by `new_consumer` to the queue's topic, as a member that
    leaves while stuck (its current consumer is `membership.consumer`)."""
    membership = TaskQueueMembership(
        new_consumer, overdue,
        lambda consumer: consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke),
        group_peers(AdminClient(admin_config(bootstrap)), group), task_queue, identity)
    membership.join()
    return membership


def group_peers(admin: AdminClient, group: str, timeout_s: float = 5.0) -> Callable[[Consumer], int | None]:
    """A function counting the members of `group` other than the consumer given (None if unknown)."""

    def others(consumer: Consumer) -> int | None:
        try:
            description = admin.describe_consumer_groups([group], request_timeout=timeout_s)[group].result(timeout_s)
            mine = consumer.memberid() or ""
        except Exception as exc:  # noqa: BLE001 - the broker away: unknown, stay as we are
            log.info("worker_group_not_described", group=group, error=str(exc))
            return None
        return sum(1 for m in description.members if m.member_id != mine)

    return others
