"""Check recorded histories against the current workflow code, as Temporal's Replayer.

Run it in a test over histories saved from production before deploying a change: a
`NonDeterminismError` means open runs would fail their next workflow task.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import orjson

from streamproc.semantics.workflow_events import EventType
from streamproc.converter import DataConverter
from streamproc.workflow.definition import WorkflowDefinition
from streamproc.workflow.instance import TaskOutcome, WorkflowInstance

__all__ = ["Replayer"]


class Replayer:
    def __init__(self, *, workflows: Sequence[type], data_converter: DataConverter | None = None) -> None:
        self._data_converter = data_converter
        definitions = [WorkflowDefinition.of(cls) for cls in workflows]
        self._definitions = {d.name: d for d in definitions}

    def replay(self, history: Iterable[dict[str, Any]] | str | bytes) -> TaskOutcome:
        """Replay `history` (event dicts, or their JSON list) through its workflow's code.

        Raises `NonDeterminismError` when the code issues other commands than the
        history recorded, and re-raises what the code raised if it failed a task. Returns
        the outcome of the history's open workflow task (no commands if it has none).
        """
        events = orjson.loads(history) if isinstance(history, (str, bytes)) else list(history)
        if not events or events[0].get("event_type") != EventType.WORKFLOW_EXECUTION_STARTED.name:
            raise ValueError("a history must begin with WORKFLOW_EXECUTION_STARTED")
        workflow_type = (events[0].get("attributes") or {}).get("workflow_type")
        definition = self._definitions.get(workflow_type)
        if definition is None:
            raise ValueError(f"no workflow registered for type {workflow_type!r}; "
                             f"registered: {sorted(self._definitions)}")
        outcome = WorkflowInstance(definition, events, data_converter=self._data_converter).activate()
        if outcome.error is not None:
            raise outcome.error
        return outcome
