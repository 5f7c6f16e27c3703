"""When the time-skipping test environment moves its clock, and how far.

The engine calls `TimeSkipper.on_idle` on its own thread after a step that read nothing
and has nothing to commit. The clock jumps only when someone wants time to pass:

* a caller waits for a workflow's result and automatic skipping is on (Temporal's rule:
  ``handle.result()`` / ``execute_workflow`` unlock skipping, `auto_time_skipping_disabled`
  locks it again), or
* `WorkflowEnvironment.sleep` waits for a time (it skips, up to that time, whatever the
  automatic setting).

and only when the engine is idle: it has read every command on the log (clients' and
its own), and no work is in progress: no workflow task out, no activity attempt
dispatched or running, no job out (`streamproc.due.waiting`). Then every open
workflow waits on a timer, a backoff, a timeout or a schedule, and the clock jumps to the
earliest of those due dates (not beyond a sleeper's time), where the engine fires it at
once. The check runs where the state is written, between two batches, so it sees
committed state that nothing changes under it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator

from streamproc.clock import SkippingClock
from streamproc.due.waiting import Outlook


class TimeSkipper:
    def __init__(self, clock: SkippingClock, outlook: Callable[[], Outlook | None]) -> None:
        self.clock = clock
        self._outlook = outlook
        self._lock = threading.Lock()
        self._result_waits = 0
        self._auto_disabled = 0
        #: Sleepers: (time they wait for, their loop, the future that wakes them).
        self._sleepers: list[tuple[int, asyncio.AbstractEventLoop, asyncio.Future]] = []

    # what callers want (event loop thread) -------------------------------------------------
    def result_wait(self) -> contextlib.AbstractContextManager[None]:
        """Entered while a caller waits for a workflow result."""
        return self._counted("_result_waits")

    def auto_disabled(self) -> contextlib.AbstractContextManager[None]:
        """Entered while waiting for a result must not skip time."""
        return self._counted("_auto_disabled")

    @contextlib.contextmanager
    def _counted(self, counter: str) -> Iterator[None]:
        with self._lock:
            setattr(self, counter, getattr(self, counter) + 1)
        try:
            yield
        finally:
            with self._lock:
                setattr(self, counter, getattr(self, counter) - 1)

    async def sleep_until(self, at_ms: int) -> None:
        """Return once the clock reached `at_ms`: by skipping, or by real time passing."""
        loop = asyncio.get_running_loop()
        while (now := self.clock.now_ms()) < at_ms:
            woken = loop.create_future()
            sleeper = (at_ms, loop, woken)
            with self._lock:
                self._sleepers.append(sleeper)
            try:
                # Real time moves the clock too: wake then at the latest.
                await asyncio.wait_for(woken, (at_ms - now) / 1000)
            except TimeoutError:
                pass
            finally:
                with self._lock:
                    if sleeper in self._sleepers:
                        self._sleepers.remove(sleeper)

    # the engine thread -------------------------------------------------------------------------
    def on_idle(self) -> None:
        with self._lock:
            auto = self._result_waits > 0 and self._auto_disabled == 0
            limit = min((at for at, _, _ in self._sleepers), default=None)
        if not auto and limit is None:
            return
        now = self.clock.now_ms()
        if limit is not None and limit <= now:
            self._wake_sleepers(now)
            return
        outlook = self._outlook()
        if outlook is None or outlook.busy:
            return
        target = outlook.next_due_ms
        if limit is not None:
            target = limit if target is None else min(target, limit)
        if target is None or target <= now:
            return  # nothing to skip to, or the engine fires it at its next step anyway
        self._wake_sleepers(self.clock.skip_to(target))

    def _wake_sleepers(self, now_ms: int) -> None:
        with self._lock:
            due = [(loop, woken) for at, loop, woken in self._sleepers if at <= now_ms]
        for loop, woken in due:
            loop.call_soon_threadsafe(_set_once, woken)


def _set_once(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)
