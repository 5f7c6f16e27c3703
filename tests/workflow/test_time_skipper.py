"""When the time-skipping environment moves its clock, without a broker: the engine's idle
probe is replaced by an outlook the test sets."""

from __future__ import annotations

import asyncio
import time

import pytest

from streamproc.clock import SkippingClock
from streamproc.due.waiting import Outlook, combined
from streamproc.testing import WorkflowEnvironment
from streamproc.testing.time_skipping import TimeSkipper

DAY_MS = 24 * 3600 * 1000


class Probe:
    def __init__(self) -> None:
        self.outlook: Outlook | None = None
        self.asked = 0

    def __call__(self) -> Outlook | None:
        self.asked += 1
        return self.outlook


def skipper_in_a_day() -> tuple[TimeSkipper, Probe, int]:
    """A skipper whose engine waits for something due in a day (the due time is returned)."""
    probe = Probe()
    skipper = TimeSkipper(SkippingClock(), probe)
    due = skipper.clock.now_ms() + DAY_MS
    probe.outlook = Outlook(busy=False, next_due_ms=due)
    return skipper, probe, due


def test_nothing_skips_while_nobody_waits_for_a_result_or_sleeps():
    skipper, probe, _ = skipper_in_a_day()
    skipper.on_idle()
    assert skipper.clock.skipped_ms == 0 and probe.asked == 0  # not even asked


def test_a_result_wait_jumps_to_the_next_due_time_when_the_engine_only_waits():
    skipper, _, due = skipper_in_a_day()
    with skipper.result_wait():
        skipper.on_idle()
    assert skipper.clock.now_ms() >= due
    assert DAY_MS - 1000 < skipper.clock.skipped_ms <= DAY_MS


@pytest.mark.parametrize("outlook", [None, Outlook(busy=True, next_due_ms=0)], ids=["log-not-drained", "busy"])
def test_no_jump_while_commands_are_unread_or_work_is_in_progress(outlook):
    skipper, probe, _ = skipper_in_a_day()
    probe.outlook = outlook if outlook is None else Outlook(True, skipper.clock.now_ms() + DAY_MS)
    with skipper.result_wait():
        skipper.on_idle()
    assert skipper.clock.skipped_ms == 0


def test_auto_skipping_disabled_stops_result_waits_from_skipping():
    skipper, _, _ = skipper_in_a_day()
    with skipper.result_wait(), skipper.auto_disabled():
        skipper.on_idle()
    assert skipper.clock.skipped_ms == 0


def test_a_sleeper_skips_up_to_its_time_not_beyond_and_wakes():
    skipper, probe, due = skipper_in_a_day()
    probe.outlook = Outlook(busy=False, next_due_ms=due + 10 * DAY_MS)  # later than the sleep

    async def main():
        with skipper.auto_disabled():  # env.sleep skips anyway
            sleeping = asyncio.create_task(skipper.sleep_until(due))
            await asyncio.sleep(0.01)
            began = time.monotonic()
            await asyncio.to_thread(skipper.on_idle)  # the engine thread
            await asyncio.wait_for(sleeping, 5)
            return time.monotonic() - began

    assert asyncio.run(main()) < 1
    assert due <= skipper.clock.now_ms() < due + 1000


def test_the_clock_never_goes_back():
    clock = SkippingClock()
    ahead = clock.skip_to(clock.now_ms() + 5000)
    assert clock.skip_to(ahead - 4000) >= ahead


def test_outlooks_combine_busy_if_one_is_and_due_at_the_earliest():
    assert combined([Outlook(False, 5), Outlook(True, None), Outlook(False, 3)]) == Outlook(True, 3)
    assert combined([]) == Outlook(False, None)


def test_temporal_test_server_options_say_they_are_not_implemented():
    with pytest.raises(NotImplementedError, match="port is not implemented by streamproc's WorkflowEnvironment"):
        asyncio.run(WorkflowEnvironment.start_time_skipping(port=7233))
