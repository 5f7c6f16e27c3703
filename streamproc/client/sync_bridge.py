"""The synchronous API as a thin layer over the asyncio one: one implementation, two faces.

The client is written once, as coroutines (`Client`, its handles). Synchronous callers
(scripts, the CLI, worker threads) get a `SyncProxy`: every coroutine method of the
object it wraps runs on a private event loop in a daemon thread, and the calling thread
blocks on its result; an async iterator becomes an iterator; handles returned by those
methods are wrapped in turn. Attributes and plain methods pass through unchanged.

The calling thread may be anything, including a thread that runs an event loop of its
own: the work happens on the private loop, never on the caller's.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

from streamproc.closing import ClosesOnExit

__all__ = ["LoopThread", "SyncProxy", "sync_proxied"]


class LoopThread:
    """An event loop running in a daemon thread, for the blocking callers of one client."""

    def __init__(self, name: str = "streamproc-sync-client") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coroutine: Any) -> Any:
        """Run `coroutine` on the loop and wait for it; an interrupt (Ctrl-C) cancels it."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self.loop.close()


def sync_proxied(cls: type) -> type:
    """Mark a class whose instances, returned by a proxied call, are proxied too."""
    cls._sync_proxied = True
    return cls


class SyncProxy(ClosesOnExit):
    """`target` with its coroutine methods made blocking, run on `loop`."""

    __slots__ = ("_target", "_loop")

    def __init__(self, target: Any, loop: LoopThread) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_loop", loop)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if inspect.iscoroutinefunction(value):
            def blocking(*args: Any, **kwargs: Any) -> Any:
                return self._wrap(self._loop.run(value(*args, **kwargs)))
            blocking.__doc__ = value.__doc__
            return blocking
        if inspect.isasyncgenfunction(value):
            def iterating(*args: Any, **kwargs: Any) -> Iterator[Any]:
                return self._iterate(value(*args, **kwargs))
            iterating.__doc__ = value.__doc__
            return iterating
        if inspect.ismethod(value):  # a plain method may return a handle: proxy that too
            def plain(*args: Any, **kwargs: Any) -> Any:
                return self._wrap(value(*args, **kwargs))
            plain.__doc__ = value.__doc__
            return plain
        return self._wrap(value)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._target, name, value)

    def _wrap(self, value: Any) -> Any:
        if getattr(type(value), "_sync_proxied", False):
            return SyncProxy(value, self._loop)
        if hasattr(value, "__anext__"):  # what an awaited call returned is an async iterator
            return self._iterate(value)
        return value

    def _iterate(self, iterator: AsyncIterator[Any]) -> Iterator[Any]:
        while True:
            try:
                item = self._loop.run(iterator.__anext__())
            except StopAsyncIteration:
                return
            yield self._wrap(item)

    def __repr__(self) -> str:
        return f"{self._target!r} (synchronous)"

    def __eq__(self, other: object) -> bool:
        return self._target == (other._target if isinstance(other, SyncProxy) else other)

    def __hash__(self) -> int:
        return hash(self._target)


class FollowsClientFace:
    """A helper made from a client takes that client's face: from an asyncio `Client`, its
    calls are coroutines; from a `SyncClient` (a `SyncProxy`), the helper is made over the
    proxied client and comes back as the blocking proxy on the same loop. Subclasses take
    the client as their first argument and are `@sync_proxied`."""

    def __new__(cls, client: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(client, SyncProxy):
            return SyncProxy(cls(client._target, *args, **kwargs), client._loop)
        return super().__new__(cls)

