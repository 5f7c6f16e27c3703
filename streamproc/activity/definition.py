"""`@activity.defn`: marks a function as an activity and names its activity type."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any, TypeVar, overload

__all__ = ["ActivityDefinition", "defn"]

F = TypeVar("F", bound=Callable[..., Any])

_ATTRIBUTE = "__streamproc_activity_definition__"


@dataclasses.dataclass(frozen=True, slots=True)
class ActivityDefinition:
    """An activity type and the function a worker runs for it."""

    name: str
    fn: Callable[..., Any]
    is_async: bool

    @staticmethod
    def of(fn: Callable[..., Any]) -> ActivityDefinition:
        """The definition `@defn` attached to `fn`; raises TypeError if it has none."""
        definition = getattr(fn, _ATTRIBUTE, None)
        if definition is None:
            raise TypeError(f"{getattr(fn, '__qualname__', fn)!r} is not an activity: "
                            "decorate it with @activity.defn")
        return definition


@overload
def defn(fn: F) -> F: ...


@overload
def defn(*, name: str | None = None) -> Callable[[F], F]: ...


def defn(fn: F | None = None, *, name: str | None = None) -> F | Callable[[F], F]:
    """Mark a sync or async function as an activity.

    The activity type is `name`, or the function's name. Sync functions run in the
    worker's thread pool, coroutine functions on its event loop. The function itself is
    returned unchanged, so it can still be called directly (e.g. in a unit test).
    """

    def decorate(f: F) -> F:
        if not callable(f):
            raise TypeError(f"@activity.defn needs a function, got {f!r}")
        activity_type = name if name is not None else getattr(f, "__name__", "")
        if not activity_type:
            raise ValueError(f"activity name must be a non-empty string, got {activity_type!r}")
        setattr(f, _ATTRIBUTE, ActivityDefinition(activity_type, f, inspect.iscoroutinefunction(f)))
        return f

    return decorate(fn) if fn is not None else decorate
