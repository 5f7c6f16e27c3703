"""The due-date checker of one partition.

It wakes at the earliest due date (not on a coarse tick), scans only what is due with
upper-bounded range scans capped per round, and writes one command per due item. It
works on committed state, so it cannot see whether a command it wrote is still in
flight: it remembers what it wrote until the command has been processed (Zeebe's
lesson), and the processor re-checks state and deadline anyway, so a duplicate is
rejected harmlessly. The memory is lost on failover, which is why both layers exist.
"""

from __future__ import annotations

from collections.abc import Sequence

from streamproc.due.sources import DueSource, Item
from streamproc.protocol.command_batches import pack
from streamproc.protocol.records import Record

#: A command written this long ago and still not seen processed is written again
#: (its transaction may have been aborted).
RESEND_AFTER_MS = 10_000


class DueDateChecker:
    def __init__(self, sources: Sequence[DueSource], batch_limit: int = 1000) -> None:
        self._sources = list(sources)
        #: The sources by the value type of their commands: `processed` runs for every command.
        self._by_type: dict[str, list[DueSource]] = {}
        for source in self._sources:
            self._by_type.setdefault(source.value_type, []).append(source)
        self._limit = batch_limit
        self._in_flight: dict[Item, int] = {}
        self._waiting_for_in_flight = False
        #: The earliest time at which something is due (each source says when its items are).
        self.next_fire_ms: int | None = None
        #: The earliest of those that ends a wait (not a job stream's lease: `due/waiting.py`).
        self.next_wait_ms: int | None = None
        self.refresh()

    def refresh(self) -> None:
        """Re-read the earliest due date from committed state (after each commit)."""
        times = [(t, s.ends_a_wait) for s in self._sources if (t := s.next_fire_ms()) is not None]
        self.next_fire_ms = min(t for t, _ in times) if times else None
        waits = [t for t, ends_a_wait in times if ends_a_wait]
        self.next_wait_ms = min(waits) if waits else None
        self._waiting_for_in_flight = False

    def wait_ms(self, now_ms: int) -> int | None:
        """How long until something is due (0 = now), or None when nothing is scheduled.

        When an item is due is its source's rule (see `streamproc.due.sources`). When
        everything due has a command in flight, the answer is the resend interval:
        processing those commands refreshes the checker sooner.
        """
        if self.next_fire_ms is None:
            return None
        if self._waiting_for_in_flight:
            return RESEND_AFTER_MS
        return max(0, self.next_fire_ms - now_ms)

    def collect(self, now_ms: int) -> list[Record]:
        """Commands for everything due now that has no command in flight, at most the cap
        (of the commands, not of the records: the packable ones come in batches)."""
        if self.next_fire_ms is None or self.next_fire_ms > now_ms:
            return []
        commands: list[Record] = []
        # In-flight items are skipped without counting against the cap, so a burst
        # larger than the cap keeps moving while earlier commands are in flight.
        scan_limit = self._limit + len(self._in_flight)
        for source in self._sources:
            for item, command in source.due(now_ms, scan_limit):
                if len(commands) >= self._limit:
                    break
                sent = self._in_flight.get(item)
                if sent is not None and now_ms - sent < RESEND_AFTER_MS:
                    continue
                self._in_flight[item] = now_ms
                commands.append(command)
        self._waiting_for_in_flight = not commands
        # The schedules due at this pass wake up in one TRIGGER batch: one record on the log,
        # each schedule still checked on its own when processed (`command_batches.py`).
        return [cmd for _, cmd in pack((0, cmd) for cmd in commands)]

    def processed(self, command: Record) -> None:
        """The processor has handled one of our commands (accepted or rejected): forget it."""
        if not self._in_flight and not self._waiting_for_in_flight:
            return  # nothing to forget, nothing to wake for: the usual case, asked for every command
        item = self._item_of(command)
        if item is not None:
            self._in_flight.pop(item, None)
            self._waiting_for_in_flight = False

    def due_ms_of(self, command: Record) -> int | None:
        """When a command of ours was due (its item's time), or None if it is none of ours."""
        item = self._item_of(command)
        return None if item is None else item[2]

    def _item_of(self, command: Record) -> Item | None:
        for source in self._by_type.get(command.value_type, ()):
            item = source.item_of(command)
            if item is not None:
                return item
        return None

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)


def partition_checker(db) -> DueDateChecker:
    """The checker of a partition database: every due-date family the engine keeps."""
    from streamproc.due.sources import (
        ActivityDueSource,
        JobDueSource,
        JobStreamDueSource,
        ScheduleDueSource,
        WorkflowDueSource,
    )
    from streamproc.state.activities import ActivityTimers
    from streamproc.state.job_streams import JobStreamLeases
    from streamproc.state.jobs import JobDueDates
    from streamproc.state.schedules import ScheduleDueDates
    from streamproc.state.workflow_timers import WorkflowDueDates

    return DueDateChecker([JobDueSource(JobDueDates(db)), ActivityDueSource(ActivityTimers(db)),
                           WorkflowDueSource(WorkflowDueDates(db)), ScheduleDueSource(ScheduleDueDates(db)),
                           JobStreamDueSource(JobStreamLeases(db))])
