"""`@workflow.defn` on a class and `@workflow.run` on its async entry point."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any, TypeVar, overload

__all__ = ["WorkflowDefinition", "defn", "run"]

C = TypeVar("C", bound=type)
F = TypeVar("F", bound=Callable[..., Any])

_DEFINITION = "__streamproc_workflow_definition__"
_RUN = "__streamproc_workflow_run__"


@dataclasses.dataclass(frozen=True, slots=True)
class WorkflowDefinition:
    """A workflow type: the class a worker instantiates per run and its run method."""

    name: str
    cls: type
    run_method: str

    @staticmethod
    def of(cls: type) -> WorkflowDefinition:
        """The definition `@defn` attached to `cls`; raises TypeError if it has none."""
        definition = cls.__dict__.get(_DEFINITION) if isinstance(cls, type) else None
        if definition is None:
            raise TypeError(f"{getattr(cls, '__qualname__', cls)!r} is not a workflow: "
                            "decorate the class with @workflow.defn")
        return definition


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
        setattr(c, _DEFINITION, WorkflowDefinition(workflow_type, c, runs[0]))
        return c

    return decorate(cls) if cls is not None else decorate


def run(fn: F) -> F:
    """Mark the workflow's entry point; it must be a coroutine function (``async def``)."""
    if not inspect.iscoroutinefunction(fn):
        raise TypeError(f"@workflow.run needs an async method, got {getattr(fn, '__qualname__', fn)!r}")
    setattr(fn, _RUN, True)
    return fn
