"""State the changelog does not carry: the run deadlines' index, derived from run documents.

A run's document names the deadlines armed for it (`WorkflowRun.deadlines`, kind ->
due_ms), and `workflow_deadlines` is only their index ordered by time, for the due-date
checker (`workflow_timers.py` writes both together). A workflow task's deadline moves with
every task, so mirroring the index cost two changelog records a task (the old key's
tombstone and the new key), half of a checkpointed step's. The engine still writes the
index to its local RocksDB; the changelog leaves it out, and a restore rebuilds it from
each run document it applies, against the document it replaces (`index_writes`).

A changelog written by an engine from before carries the index too: its records are
skipped (`DERIVED_FAMILY`), the documents say the same. An engine from before cannot restore a
changelog without them (its runs' deadlines would never fire): upgrading needs a full
stop of the engines, as for the history's record layout.
"""

from __future__ import annotations

from collections.abc import Iterator

import orjson

from streamproc.state.db import Write
from streamproc.state.families import Family
from streamproc.state.workflow_timers import deadline_key

_RUNS = Family.WORKFLOW_RUNS
_DEADLINES = Family.WORKFLOW_DEADLINES
#: The family rebuilt from documents rather than mirrored on the changelog, and the
#: family of the documents it is rebuilt from.
DERIVED_FAMILY = _DEADLINES
DOCUMENT_FAMILY = _RUNS


def index_writes(key: bytes, value: bytes | None, previous: bytes | None) -> Iterator[tuple[Write, bytes | None]]:
    """The index writes that go with writing the run document `value` (None: deleting it)
    over `previous` at `key`: its old deadlines' keys deleted and its new ones put."""
    run_key = int.from_bytes(key, "big")
    old = _deadline_keys(run_key, previous)
    new = _deadline_keys(run_key, value)
    for index_key in old - new:
        yield (_DEADLINES, index_key), None
    for index_key in new - old:
        yield (_DEADLINES, index_key), b""


def _deadline_keys(run_key: int, document: bytes | None) -> set[bytes]:
    if document is None:
        return set()
    deadlines = orjson.loads(document).get("deadlines") or {}
    return {deadline_key(due_ms, run_key, kind) for kind, due_ms in deadlines.items()}
