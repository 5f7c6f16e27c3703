"""The blocking face of the asyncio client (`client/sync_bridge.py`), without a broker."""

from __future__ import annotations

import asyncio
import signal
import threading
import time

import pytest

from streamproc.client.sync_bridge import LoopThread, SyncProxy, sync_proxied


@sync_proxied
class Handle:
    def __init__(self, name: str) -> None:
        self.name = name

    async def result(self) -> tuple[str, str]:
        await asyncio.sleep(0)
        return self.name, threading.current_thread().name


class AsyncThing:
    label = "thing"

    async def open(self, name: str) -> Handle:
        return Handle(name)

    def handle(self, name: str) -> Handle:
        return Handle(name)

    async def names(self):
        for name in ("a", "b"):
            yield name

    async def pages(self):
        return self.names()

    async def fail(self) -> None:
        raise ValueError("refused")

    async def forever(self, started: threading.Event, cancelled: threading.Event) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise


@pytest.fixture
def thing():
    loop = LoopThread("bridge-test")
    yield SyncProxy(AsyncThing(), loop)
    loop.close()


def test_coroutines_block_and_run_on_the_private_loop_and_handles_are_proxied_too(thing):
    handle = thing.open("x")
    assert isinstance(handle, SyncProxy) and handle.name == "x"
    assert handle.result() == ("x", "bridge-test")
    assert thing.handle("y").result() == ("y", "bridge-test")  # a plain method's handle, too
    assert thing.label == "thing"


def test_async_iterators_become_iterators_and_errors_pass_through(thing):
    assert list(thing.names()) == ["a", "b"]
    assert list(thing.pages()) == ["a", "b"]  # an awaited call that returns an async iterator
    with pytest.raises(ValueError, match="refused"):
        thing.fail()


def test_ctrl_c_in_a_blocked_call_cancels_it_on_the_loop(thing):
    started, cancelled = threading.Event(), threading.Event()
    main = threading.main_thread().ident

    def interrupt() -> None:
        started.wait(5)
        time.sleep(0.2)  # the caller is blocked in the call by then, not still entering it
        signal.pthread_kill(main, signal.SIGINT)

    # A process started in the background by a shell inherits SIGINT ignored, and Python then
    # installs no handler of its own: Ctrl-C is what is tested, so Python's handler it is.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=interrupt).start()
        with pytest.raises(KeyboardInterrupt):
            thing.forever(started, cancelled)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert cancelled.wait(5)
