"""`workflow.unsafe`: Temporal's escape hatches from its workflow sandbox.

streamproc has no sandbox: workflow modules are imported once, normally, and workflow code
is kept deterministic by its event loop (real time, threads and I/O raise
`NondeterministicCallError`), not by re-importing modules in a restricted environment. So
these are accepted and do nothing, and code written for Temporal runs unchanged::

    with workflow.unsafe.imports_passed_through():
        from myapp.activities import charge
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from streamproc.workflow.current import maybe_current_runtime

__all__ = ["imports_passed_through", "sandbox_unrestricted", "in_sandbox", "is_replaying",
           "is_replaying_history_events"]


@contextlib.contextmanager
def imports_passed_through() -> Iterator[None]:
    """Accepted for Temporal code; a no-op (no sandbox re-imports modules here)."""
    yield


@contextlib.contextmanager
def sandbox_unrestricted() -> Iterator[None]:
    """Accepted for Temporal code; a no-op (there is no sandbox to lift)."""
    yield


def in_sandbox() -> bool:
    """Always False: workflow code never runs in a sandbox here."""
    return False


def is_replaying() -> bool:
    """True while workflow code re-executes what history records; False outside a workflow."""
    runtime = maybe_current_runtime()
    return runtime is not None and runtime.replaying


is_replaying_history_events = is_replaying
