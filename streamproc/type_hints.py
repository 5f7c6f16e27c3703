"""The type hints of a function's parameters and result, which the data converter decodes
arguments and results by (as Temporal's SDK does with an activity's or a workflow's
annotations).

Hints are resolved the first time a function is used, not when it is decorated, so an
annotation may name a class defined further down the module. A hint that cannot be
resolved (a string naming a class local to a function) counts as no hint: that value
stays plain JSON, as a function without annotations gets.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = ["CallTypes", "call_types", "handler_types"]

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


class CallTypes(NamedTuple):
    """The hints of the positional parameters, in order (None: no hint), and of the result."""

    parameters: tuple[Any, ...]
    result: Any


_NONE = CallTypes((), None)


@functools.lru_cache(maxsize=4096)
def call_types(fn: Callable[..., Any], *, skip_self: bool = False) -> CallTypes:
    """The hints of `fn` (a function defined once: the answer is cached). With `skip_self`
    the first parameter (``self`` of a function taken from a class) is left out. Never
    raises: what cannot be read counts as no hint."""
    return _call_types(fn, skip_self)


def handler_types(handler: Callable[..., Any]) -> CallTypes:
    """The hints of a handler a run holds: a bound method (cached by its function) or a
    function set at run time (a closure per run: read each time, never cached)."""
    if inspect.ismethod(handler):
        return call_types(handler.__func__, skip_self=True)
    return _call_types(handler, False)


def _call_types(fn: Callable[..., Any], skip_self: bool) -> CallTypes:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return _NONE
    hints = _resolved_hints(fn)
    parameters = [p for p in signature.parameters.values() if p.kind in _POSITIONAL]
    if skip_self:
        parameters = parameters[1:]
    return CallTypes(tuple(_usable(hints.get(p.name)) for p in parameters), _usable(hints.get("return")))


def _resolved_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn)
    except Exception:  # one unresolvable name: resolve the others one by one
        pass
    annotations = getattr(fn, "__annotations__", None) or {}
    namespace = getattr(inspect.unwrap(fn), "__globals__", {})
    hints: dict[str, Any] = {}
    for name, annotation in annotations.items():
        try:
            hints[name] = typing.get_type_hints(_Annotated(name, annotation), namespace)[name]
        except Exception:
            continue
    return hints


class _Annotated:
    """An object with one annotation, for typing to resolve it alone."""

    def __init__(self, name: str, annotation: Any) -> None:
        self.__annotations__ = {name: annotation}


def _usable(hint: Any) -> Any:
    # None (the result of `-> None`) and Any say nothing to convert by.
    if hint is None or hint is type(None) or hint is Any or hint is object:
        return None
    return hint
