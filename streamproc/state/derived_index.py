"""State the changelog does not carry: due-date indexes, derived from the documents they index.

Two kinds of document name their own due dates, and each has an index of them ordered by
time, for the due-date checker:

* a run's document names the deadlines armed for it (`WorkflowRun.deadlines`, kind ->
  due_ms), indexed in `workflow_deadlines` (`workflow_timers.py` writes both together). A
  workflow task's deadline moves with every task, so mirroring the index cost two
  changelog records a task (the old key's tombstone and the new key), half of a
  checkpointed step's.
* a job's document names its started attempt's deadline (`deadline_ms`) and its backoff's
  end (`recur_at_ms`), indexed in `job_deadlines` and `job_backoff` (`jobs.py`,
  `job_due_dates`). Mirroring them cost a put when an attempt started and a tombstone when
  it ended: two of a pushed job's four changelog records.

The engine still writes the indexes to its local RocksDB; the changelog leaves them out
(`DERIVED_FAMILIES`), and a restore rebuilds them from each document it applies, against
the document it replaces (`index_writes`).

A changelog written by an engine from before carries the indexes too: their records are
skipped, the documents say the same. An engine from before cannot restore a changelog
without them (its runs' deadlines, its jobs' timeouts and backoffs would never fire):
upgrading needs a full stop of the engines, as for the history's record layout, and there
is no rollback past it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import orjson

from streamproc.state.db import Write
from streamproc.state.families import Family
from streamproc.state.jobs import job_due_dates
from streamproc.state.workflow_timers import deadline_key

_DEADLINES = Family.WORKFLOW_DEADLINES


def _run_deadlines(run_key: int, document: dict) -> set[Write]:
    deadlines = document.get("deadlines") or {}
    return {(_DEADLINES, deadline_key(due_ms, run_key, kind)) for kind, due_ms in deadlines.items()}


#: Per family of documents: the index entries a document implies, from its entity's key and
#: its decoded value.
_INDEXES: dict[Family, Callable[[int, dict], set[Write]]] = {
    Family.WORKFLOW_RUNS: _run_deadlines,
    Family.JOBS: job_due_dates,
}
#: The families rebuilt from documents rather than mirrored on the changelog, and the
#: families of the documents they are rebuilt from (tuples: the cheapest `in` for members).
DERIVED_FAMILIES = (Family.WORKFLOW_DEADLINES, Family.JOB_DEADLINES, Family.JOB_BACKOFF)
DOCUMENT_FAMILIES = tuple(_INDEXES)


def index_writes(family: Family, key: bytes, value: bytes | None,
                 previous: bytes | None) -> Iterator[tuple[Write, bytes | None]]:
    """The index writes that go with writing the document `value` (None: deleting it) of
    `family` over `previous` at `key`: its old entries deleted and its new ones put."""
    entries = _INDEXES[family]
    entity = int.from_bytes(key, "big")
    old = entries(entity, orjson.loads(previous)) if previous is not None else set()
    new = entries(entity, orjson.loads(value)) if value is not None else set()
    for write in old - new:
        yield write, None
    for write in new - old:
        yield write, b""
