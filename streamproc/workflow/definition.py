"""`@workflow.defn` on a class, `@workflow.run` on its async entry point, and the
`@workflow.signal` and `@workflow.query` handlers it declares, as in Temporal's SDK."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any, TypeVar, overload

from streamproc.type_hints import CallTypes, call_types

__all__ = ["WorkflowDefinition", "HandlerDefinition", "defn", "run", "signal", "query", "update",
           "signal_name_of", "query_name_of", "update_name_of", "workflow_type_of", "result_type_of"]

C = TypeVar("C", bound=type)
F = TypeVar("F", bound=Callable[..., Any])

_DEFINITION = "__streamproc_workflow_definition__"
_RUN = "__streamproc_workflow_run__"
_SIGNAL = "__streamproc_workflow_signal__"
_QUERY = "__streamproc_workflow_query__"
_UPDATE = "__streamproc_workflow_update__"
_VALIDATOR = "__streamproc_workflow_update_validator__"


@dataclasses.dataclass(frozen=True, slots=True)
class HandlerDefinition:
    """A signal or query handler: the name it answers to (None: dynamic, any name not
    handled otherwise, called with the name and the list of arguments) and its method."""

    name: str | None
    method: str
    #: An update's validator method, if it has one.
    validator: str | None = None

    @property
    def dynamic(self) -> bool:
        return self.name is None


@dataclasses.dataclass(frozen=True, slots=True)
class WorkflowDefinition:
    """A workflow type: the class a worker instantiates per run, its run method, and its
    signal and query handlers by name."""

    name: str
    cls: type
    run_method: str
    signals: dict[str, HandlerDefinition] = dataclasses.field(default_factory=dict)
    queries: dict[str, HandlerDefinition] = dataclasses.field(default_factory=dict)
    dynamic_signal: HandlerDefinition | None = None
    dynamic_query: HandlerDefinition | None = None
    updates: dict[str, HandlerDefinition] = dataclasses.field(default_factory=dict)
    dynamic_update: HandlerDefinition | None = None

    @staticmethod
    def of(cls: type) -> WorkflowDefinition:
        """The definition `@defn` attached to `cls`; raises TypeError if it has none."""
        definition = cls.__dict__.get(_DEFINITION) if isinstance(cls, type) else None
        if definition is None:
            raise TypeError(f"{getattr(cls, '__qualname__', cls)!r} is not a workflow: "
                            "decorate the class with @workflow.defn")
        return definition

    def run_types(self) -> CallTypes:
        """The type hints of the run method's parameters and result."""
        return call_types(getattr(self.cls, self.run_method), skip_self=True)


@overload
def defn(cls: C) -> C: ...


@overload
def defn(*, name: str | None = None) -> Callable[[C], C]: ...


def defn(cls: C | None = None, *, name: str | None = None) -> C | Callable[[C], C]:
    """Mark a class as a workflow. Its type is `name`, or the class name.

    The class needs exactly one ``async def`` decorated with `@run`; a worker creates one
    instance per run (with no arguments) and awaits that method with the run's input.
    """

    def decorate(c: C) -> C:
        if not isinstance(c, type):
            raise TypeError(f"@workflow.defn needs a class, got {c!r}")
        workflow_type = name if name is not None else c.__name__
        if not workflow_type:
            raise ValueError(f"workflow name must be a non-empty string, got {workflow_type!r}")
        runs = [attr for attr, value in inspect.getmembers(c) if getattr(value, _RUN, False)]
        if len(runs) != 1:
            raise TypeError(f"workflow {c.__qualname__} needs exactly one @workflow.run method, "
                            f"found {len(runs)}: {runs}")
        signals, dynamic_signal = _handlers(c, _SIGNAL, "signal")
        queries, dynamic_query = _handlers(c, _QUERY, "query")
        updates, dynamic_update = _handlers(c, _UPDATE, "update")
        setattr(c, _DEFINITION, WorkflowDefinition(workflow_type, c, runs[0], signals, queries,
                                                   dynamic_signal, dynamic_query, updates, dynamic_update))
        return c

    return decorate(cls) if cls is not None else decorate


def run(fn: F) -> F:
    """Mark the workflow's entry point; it must be a coroutine function (``async def``)."""
    if not inspect.iscoroutinefunction(fn):
        raise TypeError(f"@workflow.run needs an async method, got {getattr(fn, '__qualname__', fn)!r}")
    setattr(fn, _RUN, True)
    return fn


def _handlers(c: type, marker: str, kind: str) -> tuple[dict[str, HandlerDefinition], HandlerDefinition | None]:
    named: dict[str, HandlerDefinition] = {}
    dynamic: HandlerDefinition | None = None
    for attr, value in inspect.getmembers(c):
        handler = getattr(value, marker, None)
        if not isinstance(handler, HandlerDefinition):
            continue
        validator = getattr(value, _VALIDATOR, None)
        handler = dataclasses.replace(handler, method=attr, validator=validator)
        if handler.dynamic:
            if dynamic is not None:
                raise TypeError(f"workflow {c.__qualname__} has two dynamic {kind} handlers: "
                                f"{dynamic.method} and {attr}")
            dynamic = handler
        elif handler.name in named:
            raise TypeError(f"workflow {c.__qualname__} has two {kind} handlers named {handler.name!r}: "
                            f"{named[handler.name].method} and {attr}")
        else:
            named[handler.name] = handler
    return named, dynamic


def _handler_decorator(marker: str, kind: str, fn: F | None, name: str | None, dynamic: bool,
                       check: Callable[[Callable[..., Any]], None]) -> F | Callable[[F], F]:
    if name is not None and dynamic:
        raise ValueError(f"a {kind} handler has a name or is dynamic, not both")
    if name is not None and (not isinstance(name, str) or not name):
        raise ValueError(f"{kind} name must be a non-empty string, got {name!r}")

    def decorate(f: F) -> F:
        if not callable(f):
            raise TypeError(f"@workflow.{kind} needs a method, got {f!r}")
        check(f)
        setattr(f, marker, HandlerDefinition(None if dynamic else (name or f.__name__), f.__name__))
        return f

    return decorate(fn) if fn is not None else decorate


def signal(fn: F | None = None, *, name: str | None = None, dynamic: bool = False) -> F | Callable[[F], F]:
    """Mark a method as the handler of the signal `name` (default: the method's name).

    The handler may be ``def`` or ``async def``; it runs on the workflow's event loop, in
    the order signals were recorded, before the code waiting on other events resumes.
    With ``dynamic=True`` it gets every signal no other handler takes, as
    ``handler(self, name, args)``.
    """
    return _handler_decorator(_SIGNAL, "signal", fn, name, dynamic, lambda f: None)


def update(fn: F | None = None, *, name: str | None = None, dynamic: bool = False) -> F | Callable[[F], F]:
    """Mark a method as the handler of the update `name` (default: the method's name).

    A caller sends the update and waits for its result. The handler (``def`` or
    ``async def``) may change state, issue commands and wait; what it returns is the
    update's result, and a `FailureError` it raises is the update's failure. Give it a
    validator with ``@<handler>.validator``: a plain method taking the same arguments that
    raises to reject the update before anything is written. With ``dynamic=True`` it
    takes every update no other handler takes, as ``handler(self, name, args)``.
    """

    def decorate(f: F) -> F:
        decorated = _handler_decorator(_UPDATE, "update", f, name, dynamic, lambda _: None)

        def validator(v: Callable[..., Any]) -> Callable[..., Any]:
            if inspect.iscoroutinefunction(v):
                raise TypeError(f"update validator {v.__qualname__} must not be async: it only reads state")
            setattr(f, _VALIDATOR, v.__name__)
            return v

        f.validator = validator  # type: ignore[attr-defined]
        return decorated

    return decorate(fn) if fn is not None else decorate


def _check_query(f: Callable[..., Any]) -> None:
    if inspect.iscoroutinefunction(f):
        raise TypeError(f"@workflow.query handler {f.__qualname__} must not be async: a query only reads state")


def query(fn: F | None = None, *, name: str | None = None, dynamic: bool = False) -> F | Callable[[F], F]:
    """Mark a plain (not async) method as the handler of the query `name` (default: the
    method's name). A query reads the workflow's state: it may not issue commands, draw
    random numbers or wait. With ``dynamic=True`` it answers every query no other handler
    takes, as ``handler(self, name, args)``."""
    return _handler_decorator(_QUERY, "query", fn, name, dynamic, _check_query)


def _name_of(handler: str | Callable[..., Any], marker: str, kind: str) -> str:
    if isinstance(handler, str):
        if not handler:
            raise ValueError(f"{kind} name must be a non-empty string")
        return handler
    definition = getattr(handler, marker, None)
    if not isinstance(definition, HandlerDefinition) or definition.dynamic:
        raise TypeError(f"expected a {kind} name or a @workflow.{kind} method, got {handler!r}")
    return definition.name


def signal_name_of(handler: str | Callable[..., Any]) -> str:
    """The name of a signal given as a name or as its @workflow.signal method."""
    return _name_of(handler, _SIGNAL, "signal")


def query_name_of(handler: str | Callable[..., Any]) -> str:
    """The name of a query given as a name or as its @workflow.query method."""
    return _name_of(handler, _QUERY, "query")


def update_name_of(handler: str | Callable[..., Any]) -> str:
    """The name of an update given as a name or as its @workflow.update method."""
    return _name_of(handler, _UPDATE, "update")


def workflow_type_of(workflow: str | Callable[..., Any] | type) -> str:
    """The type name of a workflow given as a name, a `@workflow.defn` class or its run method.

    A run method is traced to its class through its module; a class defined inside a
    function cannot be found that way and counts by its class name.
    """
    if isinstance(workflow, str):
        return workflow
    if isinstance(workflow, type):
        return WorkflowDefinition.of(workflow).name
    qualname = getattr(workflow, "__qualname__", "")
    owner_path = qualname.split(".")[:-1]
    if not owner_path:
        raise TypeError(f"expected a workflow type name, class or run method, got {workflow!r}")
    owner: Any = __import__(workflow.__module__, fromlist=["_"]) if "<locals>" not in owner_path else None
    for part in owner_path if owner is not None else ():
        owner = getattr(owner, part, None)
    if isinstance(owner, type):
        return WorkflowDefinition.of(owner).name
    return owner_path[-1]


def result_type_of(target: str | Callable[..., Any] | type) -> Any:
    """The result type hint of a workflow's run method or a handler method given as the
    method itself (``MyWorkflow.run``) or, for a workflow, its class; None for a name."""
    if isinstance(target, str):
        return None
    if isinstance(target, type):
        definition = target.__dict__.get(_DEFINITION)
        return definition.run_types().result if definition is not None else None
    return call_types(target, skip_self=True).result if callable(target) else None
