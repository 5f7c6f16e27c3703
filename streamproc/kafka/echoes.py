"""Commands the engine reads back from the log that it wrote and processed in one
transaction (due commands, `Engine._step` step 3, and relayed ones, step 4 and
`engine/relay.py`), so reading them again only moves their offsets.

Those offsets ride with the next transaction instead of costing one of their own, which
would hold up the next real command by a commit; when no transaction comes, the engine
commits them after a while (read again after a crash, they are skipped anyway).
"""

from __future__ import annotations

import time

from confluent_kafka import Message

from streamproc.protocol import codec


def is_echo(msg: Message) -> bool:
    """A command the engine wrote and processed in the same transaction (due or relayed)."""
    return codec.header(msg.headers(), codec.PROCESSED_HEADER) is not None


class EchoOffsets:
    """The next offset to commit, per partition, past the echoes read since the last commit."""

    def __init__(self) -> None:
        self._offsets: dict[int, int] = {}
        self._since = 0.0

    def __bool__(self) -> bool:
        return bool(self._offsets)

    def hold(self, messages: list[Message]) -> None:
        if not self._offsets:
            self._since = time.monotonic()
        self._offsets.update((msg.partition(), msg.offset() + 1) for msg in messages)

    def older_than(self, max_age_s: float) -> bool:
        return bool(self._offsets) and time.monotonic() - self._since >= max_age_s

    def take(self) -> dict[int, int]:
        """The offsets held, for the transaction that commits them; none are held after."""
        offsets, self._offsets = self._offsets, {}
        return offsets

    def drop(self, pid: int) -> None:
        self._offsets.pop(pid, None)
