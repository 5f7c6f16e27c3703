"""`WorkflowEnvironment`: a real engine in this process for a test, as Temporal's
``temporalio.testing.WorkflowEnvironment``::

    async with await WorkflowEnvironment.start_time_skipping() as env:
        async with Worker(env.client, task_queue="q", workflows=[Billing], activities=[charge]):
            # a workflow that sleeps 30 days returns in seconds
            print(await env.client.execute_workflow(Billing.run, id="b-1", task_queue="q"))

The engine runs on a thread of this process against the broker `STREAMPROC_BOOTSTRAP`
names, or a local one started here when none is configured (it needs Java, as
``streamproc dev``); each environment has a namespace of its own (its topics are
deleted by `shutdown`), so environments never see each other's workflows.

`start_time_skipping()`: the engine's clock is real time plus an offset that grows when
the environment skips (`streamproc.testing.time_skipping` says when: while a caller waits
for a workflow result, or `sleep` waits, and the engine is idle, the clock jumps to the
next timer, backoff or timeout). `start_local()`: real time, no skipping.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from streamproc.client.client import Client
from streamproc.clock import SkippingClock, SystemClock
from streamproc.converter import DataConverter
from streamproc.kafka.admin import TopicAdmin
from streamproc.kafka.engine import Engine
from streamproc.protocol.topics import Topics
from streamproc.settings import Settings
from streamproc.testing.time_skipping import TimeSkipper

__all__ = ["WorkflowEnvironment"]

#: How long the engine waits for a command before it looks again (and checks for idleness).
_IDLE_POLL_MS = 10
#: How long starting the engine may take (the group assigns its partitions).
_START_TIMEOUT_S = 60


class WorkflowEnvironment:
    """A running engine and a client of it. Made by `start_time_skipping` or `start_local`;
    ended by `shutdown` (or ``async with``)."""

    def __init__(self, client: Client, clock: SystemClock | SkippingClock = SystemClock(),
                 skipper: TimeSkipper | None = None, end: Callable[[], None] | None = None) -> None:
        #: An asyncio client of this environment's engine: give it to ``Worker`` and call it.
        self.client = client
        self._clock = clock
        self._skipper = skipper
        self._end = end

    @staticmethod
    def from_client(client: Client) -> WorkflowEnvironment:
        """An environment around a client of an engine running elsewhere: real time, and
        `shutdown` leaves the client and the engine alone (as Temporal's)."""
        return WorkflowEnvironment(client)

    # starting --------------------------------------------------------------------------------
    @classmethod
    async def start_time_skipping(cls, *, bootstrap: str | None = None, namespace: str | None = None,
                                  data_converter: DataConverter | None = None, partitions: int = 1,
                                  **temporal_options: Any) -> WorkflowEnvironment:
        """An engine whose clock skips ahead to the next timer, backoff or timeout when every
        workflow only waits (see `streamproc.testing.time_skipping`). `bootstrap`: the
        broker (default `STREAMPROC_BOOTSTRAP`, else a local one started here); `namespace`:
        a new one by default; `partitions` of its commands topic."""
        _not_implemented(temporal_options)
        return await cls._start(SkippingClock(), bootstrap, namespace, data_converter, partitions)

    @classmethod
    async def start_local(cls, *, bootstrap: str | None = None, namespace: str | None = None,
                          data_converter: DataConverter | None = None, partitions: int = 1,
                          **temporal_options: Any) -> WorkflowEnvironment:
        """An engine on real time (no skipping), as Temporal's local dev server; the same
        options as `start_time_skipping`."""
        _not_implemented(temporal_options)
        return await cls._start(SystemClock(), bootstrap, namespace, data_converter, partitions)

    @classmethod
    async def _start(cls, clock: SystemClock | SkippingClock, bootstrap: str | None, namespace: str | None,
                     data_converter: DataConverter | None, partitions: int) -> WorkflowEnvironment:
        broker = None
        if bootstrap is None:
            bootstrap, broker = await asyncio.to_thread(_broker)
        elif not await asyncio.to_thread(_answers, bootstrap):
            raise RuntimeError(f"no Kafka broker answers at {bootstrap}")
        namespace = namespace or f"testenv-{uuid.uuid4().hex[:12]}"
        state_dir = Path(tempfile.mkdtemp(prefix="streamproc-testenv-"))
        settings = Settings(bootstrap=bootstrap, namespace=namespace, partitions=partitions,
                            state_dir=state_dir, engine_id="testenv")
        try:  # the engine checks the connection first: off the event loop
            engine = await asyncio.to_thread(Engine, settings, clock=clock, idle_poll_ms=_IDLE_POLL_MS)
        except BaseException:
            await _abandon(None, state_dir, bootstrap, namespace, broker)
            raise
        skipper = None
        if isinstance(clock, SkippingClock):
            skipper = TimeSkipper(clock, engine.quiet_outlook)
            engine.on_idle = skipper.on_idle
        thread = threading.Thread(target=engine.run, name=f"streamproc-engine-{namespace}", daemon=True)
        thread.start()
        try:
            if not await asyncio.to_thread(engine.ready.wait, _START_TIMEOUT_S):
                raise RuntimeError(f"the test environment's engine got no partitions within {_START_TIMEOUT_S} s "
                                   f"(broker {bootstrap})")
            client = await Client.connect(bootstrap, namespace=namespace, data_converter=data_converter)
        except BaseException:
            engine.stop()
            await _abandon(thread, state_dir, bootstrap, namespace, broker)
            raise
        if skipper is not None:
            client.result_wait_scope = skipper.result_wait

        def end() -> None:
            engine.stop()
            _end(thread, state_dir, bootstrap, namespace, broker)

        return cls(client, clock, skipper, end)

    # time ------------------------------------------------------------------------------------
    @property
    def supports_time_skipping(self) -> bool:
        return self._skipper is not None

    async def get_current_time(self) -> datetime:
        """The engine's time (what ``workflow.now()`` sees), skipped time included."""
        return datetime.fromtimestamp(self._clock.now_ms() / 1000, UTC)

    async def sleep(self, duration: timedelta | float) -> None:
        """Let `duration` (a timedelta or seconds) pass: skipped at once in a time-skipping
        environment (timers due on the way fire in order, each when the engine is idle),
        slept in real time in a local one."""
        seconds = duration.total_seconds() if isinstance(duration, timedelta) else float(duration)
        if seconds < 0:
            raise ValueError(f"duration must be >= 0, got {seconds} s")
        if self._skipper is None:
            await asyncio.sleep(seconds)
            return
        await self._skipper.sleep_until(self._clock.now_ms() + round(seconds * 1000))

    @contextlib.contextmanager
    def auto_time_skipping_disabled(self) -> Iterator[None]:
        """Within this block, waiting for a workflow result does not skip time (`sleep` still does)."""
        if self._skipper is None:
            yield
            return
        with self._skipper.auto_disabled():
            yield

    # ending ----------------------------------------------------------------------------------
    async def shutdown(self) -> None:
        """Close the client, stop the engine, delete this environment's topics and state, and
        stop the broker if this environment started it (nothing for `from_client`'s)."""
        end, self._end = self._end, None
        if end is None:
            return
        try:
            await self.client.aclose()
        finally:
            await asyncio.to_thread(end)

    async def __aenter__(self) -> WorkflowEnvironment:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()


def _not_implemented(options: dict[str, Any]) -> None:
    """Temporal's options of its test servers (ports, downloads, interceptors ...)."""
    if options:
        raise NotImplementedError(f"{next(iter(options))} is not implemented by streamproc's WorkflowEnvironment "
                                  "(Temporal's option; see docs/temporal-compatibility.md)")


def _broker() -> tuple[str, Any | None]:
    """The configured broker, or a local one started here (returned to be stopped at the end)."""
    from streamproc.devenv.broker_choice import ensure_broker

    bootstrap, broker = ensure_broker()
    return bootstrap, broker if broker is not None and broker.launched else None


async def _abandon(*end_args: Any) -> None:
    """`_end` after a failed start: its own failure (no broker) must not hide the first."""
    with contextlib.suppress(Exception):
        await asyncio.to_thread(_end, *end_args)


def _answers(bootstrap: str) -> bool:
    from streamproc.devenv.broker import broker_reachable
    from streamproc.kafka.user_config import user_properties  # a secured cluster's settings

    config = {k: v for k, v in user_properties().items() if k != "bootstrap.servers"}
    return broker_reachable(bootstrap, timeout=10.0, client_config=config)


def _end(thread: threading.Thread | None, state_dir: Path, bootstrap: str, namespace: str,
         broker: Any | None) -> None:
    """After the engine was told to stop: wait for it, delete the namespace's topics and the
    engine's state, stop the broker we started."""
    if thread is not None:
        thread.join(30)
    try:
        admin = TopicAdmin(bootstrap, Topics(namespace))
        names = admin.namespace_topics()
        if names:
            admin.delete(names)
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)
        if broker is not None:
            broker.stop()
