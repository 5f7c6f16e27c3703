"""The due-date checker of one partition.

It wakes at the earliest due date (not on a coarse tick), scans only what is due with
an upper-bounded range scan capped per round, and writes one command per due item. It
works on committed state, so it cannot see whether a command it wrote is still in
flight: it remembers what it wrote until the command has been processed (Zeebe's
lesson), and the processor re-checks state and deadline anyway, so a duplicate is
rejected harmlessly. The memory is lost on failover, which is why both layers exist.
"""

from __future__ import annotations

from streamproc.protocol.records import JobIntent, Record, ValueType
from streamproc.state.jobs import JobDueDates

#: A command written this long ago and still not seen processed is written again
#: (its transaction may have been aborted).
RESEND_AFTER_MS = 10_000

_Item = tuple[str, int, int]  # (intent, due_ms, key)


class DueDateChecker:
    def __init__(self, due_dates: JobDueDates, batch_limit: int = 1000) -> None:
        self._due = due_dates
        self._limit = batch_limit
        self._in_flight: dict[_Item, int] = {}
        self.next_due_ms: int | None = None
        self._waiting_for_in_flight = False
        self.refresh()

    def refresh(self) -> None:
        """Re-read the earliest due date from committed state (after each commit)."""
        self.next_due_ms = self._due.next_due_ms()
        self._waiting_for_in_flight = False

    def wait_ms(self, now_ms: int) -> int | None:
        """How long until something is due (0 = now), or None when nothing is scheduled.

        When everything due has a command in flight, the answer is the resend interval:
        processing those commands refreshes the checker sooner.

        An item is due strictly after its due time (Zeebe: `deadline < now`).
        """
        if self.next_due_ms is None:
            return None
        if self._waiting_for_in_flight:
            return RESEND_AFTER_MS
        return max(0, self.next_due_ms + 1 - now_ms)

    def _is_in_flight(self, item: _Item, now_ms: int) -> bool:
        sent = self._in_flight.get(item)
        return sent is not None and now_ms - sent < RESEND_AFTER_MS

    def collect(self, now_ms: int) -> list[Record]:
        """Commands for everything due now that has no command in flight, at most the cap."""
        if self.next_due_ms is None or not self.next_due_ms < now_ms:
            return []
        commands: list[Record] = []
        # In-flight items are skipped without counting against the cap, so a burst
        # larger than the cap keeps moving while earlier commands are in flight.
        scan_limit = self._limit + len(self._in_flight)
        for deadline, key in self._due.timed_out(now_ms, scan_limit):
            self._add(commands, (JobIntent.TIME_OUT, deadline, key), now_ms,
                      {"deadline_ms": deadline})
        for recur_at, key in self._due.backoff_over(now_ms, scan_limit):
            self._add(commands, (JobIntent.RECUR_AFTER_BACKOFF, recur_at, key), now_ms,
                      {"recur_at_ms": recur_at})
        self._waiting_for_in_flight = not commands
        return commands

    def _add(self, commands: list[Record], item: _Item, now_ms: int, value: dict) -> None:
        if len(commands) >= self._limit or self._is_in_flight(item, now_ms):
            return
        self._in_flight[item] = now_ms
        intent, _, key = item
        commands.append(Record.command(ValueType.JOB, intent, value, key=key))

    def processed(self, command: Record) -> None:
        """The processor has handled one of our commands (accepted or rejected): forget it."""
        if command.value_type != ValueType.JOB:
            return
        self._waiting_for_in_flight = False
        if command.intent == JobIntent.TIME_OUT:
            self._in_flight.pop((JobIntent.TIME_OUT, command.value["deadline_ms"], command.key), None)
        elif command.intent == JobIntent.RECUR_AFTER_BACKOFF:
            self._in_flight.pop((JobIntent.RECUR_AFTER_BACKOFF, command.value["recur_at_ms"], command.key), None)

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)
