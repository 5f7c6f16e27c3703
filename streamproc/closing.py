"""`with thing:` for the objects that have a `close()`: readers, request channels, clients."""

from __future__ import annotations

from typing import Self


class ClosesOnExit:
    """A context manager that is its own value and closes itself at the end, whatever
    happened. The class defines `close()` (not defined here: a proxy finds its target's)."""

    __slots__ = ()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
