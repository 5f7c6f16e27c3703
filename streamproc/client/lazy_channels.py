"""A client's request channels, each made on first use and closed with the client."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

Channel = TypeVar("Channel")


class OpenedOnFirstUse(Generic[Channel]):
    """A client attribute holding a channel `make(client)` makes on first use, so that a
    client that never asks opens no replies consumer for it. `close_on(client)` closes it
    (a later use makes a fresh one). The channel is kept in the client's `_<name>`, which
    the class declares as None (not made yet)."""

    def __init__(self, make: Callable[[Any], Channel]) -> None:
        self._make = make
        self._slot = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self._slot = f"_{name}"

    def __get__(self, client: Any, owner: type | None = None) -> Channel:
        if client is None:
            return self  # type: ignore[return-value] - the descriptor itself, read from the class
        channel = getattr(client, self._slot)
        if channel is None:
            channel = self._make(client)
            setattr(client, self._slot, channel)
        return channel

    def close_on(self, client: Any) -> None:
        channel = getattr(client, self._slot)
        if channel is not None:
            channel.close()
            setattr(client, self._slot, None)
