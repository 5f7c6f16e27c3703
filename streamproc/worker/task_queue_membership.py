"""A task queue worker's place in the queue's consumer group (rule 2 of `task_leases`):
it leaves while an attempt of it is overdue and another member can take its partitions,
and it gets itself back into the group when its consumer stops taking part in it.

The second part is about librdkafka, not about us (see `streamproc.kafka.group_standing`):
a member that has not been settled in the group ("up" and "steady") for
`unsettled_rejoin_s` subscribes again, and if that does not settle it either, goes on with
a new consumer, which has new connections; one still looking for its coordinator after the
interval gets the new consumer at once. A member that is settled but holds no
partition (more workers than partitions) is left alone. The interval is 30 s: a broker just
restarted loads its groups before it answers for them, and a rebalance waits for every
member; renewing every 10 s was measured to start joins over and over during an ordinary
recovery.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import structlog
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from streamproc.kafka.batching import close_in_background
from streamproc.kafka.config import admin_config
from streamproc.kafka.group_standing import GroupStanding
from streamproc.worker.task_leases import OverdueAttempts

log = structlog.get_logger("streamproc.worker")

#: How often librdkafka reports the consumer's statistics (served by `poll`).
STATS_INTERVAL_MS = 1000

#: Group timing of task queue consumers. A worker missing for 6 s loses its partitions.
#: `max.poll.interval.ms` is also the group's rebalance timeout: how long the coordinator
#: holds every member's JoinGroup while it waits for one that has not rejoined. Kafka's
#: 5 minutes were seen after broker restarts: a worker's JoinGroup parked at the broker for
#: minutes (librdkafka: "possibly held back by preceding blocking JoinGroupRequest with
#: timeout in 268000ms") while its queue filled. Our workers poll at least every 0.1 s
#: (handlers run on other threads), so 30 s bounds that wait without ever evicting a
#: healthy worker.
GROUP_TIMING = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000, "max.poll.interval.ms": 30_000}


class TaskQueueMembership:
    """Keeps the worker in the queue's consumer group unless one of its attempts is overdue
    and another member can take the partitions over.

    A lone worker stays: leaving would hand its partitions to nobody, and a retry it runs in
    another slot is better than none (as Temporal's worker would). Two workers that both
    have overdue attempts may take turns leaving; each checks again every `check_interval_s`.
    """

    def __init__(self, consumer_config: dict[str, Any], overdue: OverdueAttempts,
                 subscribe: Callable[[Consumer], None], others_in_group: Callable[[Consumer], int | None],
                 task_queue: str, identity: str, check_interval_s: float = 5.0, log_interval_s: float = 30.0,
                 unsettled_rejoin_s: float = 30.0, clock: Callable[[], float] = time.monotonic,
                 make_consumer: Callable[[dict[str, Any]], Consumer] = Consumer) -> None:
        self._consumer_config = consumer_config
        self._make_consumer = make_consumer
        self.standing = GroupStanding()
        #: The queue's consumer; replaced by a new one when rejoining does not settle it.
        self.consumer = self._new_consumer()
        #: How many consumers this member has made.
        self.consumers_made = 1
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
        self._unsettled_rejoin_s = unsettled_rejoin_s
        #: Rejoins in a row that did not settle the member.
        self._rejoins_unsettled = 0
        self.member = False

    def _new_consumer(self) -> Consumer:
        """A consumer whose statistics feed `standing`, and the config's own `stats_cb` too
        (e.g. metrics), at the shorter of the two intervals."""
        standing = self.standing = GroupStanding()
        config = dict(self._consumer_config)
        theirs = config.pop("stats_cb", None)
        interval = min(STATS_INTERVAL_MS, int(config.get("statistics.interval.ms") or STATS_INTERVAL_MS))

        def on_stats(stats_json: str) -> None:
            standing.on_stats(stats_json)
            if theirs is not None:
                theirs(stats_json)
        return self._make_consumer({**config, "statistics.interval.ms": interval, "stats_cb": on_stats})

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
                self._rejoin_if_unsettled()
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

    def _rejoin_if_unsettled(self) -> None:
        """Subscribe again after `unsettled_rejoin_s` out of the group; renew the consumer
        after a second interval (see the module's docstring)."""
        now = self._clock()
        left_out_s = self.standing.left_out_for(now, holding=bool(self.consumer.assignment()))
        if self.standing.unsettled_since is None:  # in the group
            self._rejoins_unsettled = 0
            return
        if left_out_s < self._unsettled_rejoin_s:
            return
        standing = {**self.standing.describe(), "seconds": round(left_out_s, 1)}
        # Still looking for its coordinator ("query-coord") after a whole interval: the
        # connection is what is stuck, and subscribing again queues behind it (seen after a
        # broker froze for 20 s: the rejoin changed nothing, the new consumer joined at once).
        if self._rejoins_unsettled == 0 and self.standing.state != "query-coord":
            self._log.warning("worker_rejoining_group_unsettled", **standing)
            self.consumer.unsubscribe()
        else:
            self._log.warning("worker_consumer_renewed_unsettled", rejoins=self._rejoins_unsettled, **standing)
            self._renew_consumer()
        self._rejoins_unsettled += 1
        self.join()
        self.standing.unsettled_since = now  # the rejoin (or the new consumer) gets a whole interval

    def _renew_consumer(self) -> None:
        """Replace the consumer; the old one is closed on a thread of its own (a close can wait
        on the very connection that is stuck). It holds no partition, so nothing is lost."""
        old, self.consumer = self.consumer, self._new_consumer()
        self.consumers_made += 1
        close_in_background(old)

    def _others(self) -> int | None:
        """Other members of the group, asked at most once per check interval."""
        with self._lock:
            now = self._clock()
            if now - self._checked_at >= self._check_interval_s:
                self._checked_at = now
                self._others_seen = self._others_in_group(self.consumer)
            return self._others_seen


def join_task_queue(consumer_config: dict[str, Any], topic: str, group: str, bootstrap: str,
                    overdue: OverdueAttempts, on_assign: Callable, on_revoke: Callable, task_queue: str,
                    identity: str) -> TaskQueueMembership:
    """Subscribe a consumer with `consumer_config` to the queue's topic, as a member that
    leaves while stuck (its current consumer is `membership.consumer`)."""
    membership = TaskQueueMembership(
        consumer_config, overdue,
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
