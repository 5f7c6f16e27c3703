"""What a workflow worker answers to a QUERY_TASK: the pure part, testable without a broker.

The answer goes straight to the caller (QUERY_ANSWERED on its replies partition, with
its request id), never to the engine: a query writes no history. It is computed from the
run's cached instance when this worker has one (the state after the last task it
answered), else from a replay of the run's whole history, fetched with GET_HISTORY, that
is thrown away afterwards. A handler that raises, an unknown query name, a workflow type
this worker lacks or a history that cannot be had all answer with a failure the caller
raises as WorkflowQueryFailedError.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import structlog

from streamproc.activity.failures import failure_from_exception
from streamproc.exceptions import ApplicationError, WorkflowQueryFailedError
from streamproc.protocol.records import Record, RecordType, ValueType, WorkflowIntent
from streamproc.worker.sticky_cache import StickyCache
from streamproc.worker.workflow_activation import not_registered

__all__ = ["QueryAnswerer"]

log = structlog.get_logger("streamproc.worker")

#: The run's whole history now (GET_HISTORY by workflow id and run id).
WholeHistory = Callable[[str, str], list[dict[str, Any]]]


class QueryAnswerer:
    def __init__(self, definitions: Mapping[str, Any], cache: StickyCache[Any],
                 new_instance: Callable[[Any, list[dict[str, Any]], str], Any], whole_history: WholeHistory) -> None:
        self.definitions = definitions
        self.cache = cache
        self.new_instance = new_instance
        self.whole_history = whole_history
        #: Queries answered from a cached run, and those that needed a replay.
        self.cached = 0
        self.replayed = 0

    def answer(self, task: Record) -> Record:
        """QUERY_ANSWERED for the caller of `task`: `result`, or `failure`."""
        v = task.value
        try:
            answer: dict[str, Any] = {"result": self._result(v)}
        except Exception as exc:  # whatever went wrong is the caller's answer, never the worker's end
            log.info("workflow_query_failed", workflow_id=v["workflow_id"], run_id=v["run_id"],
                     query_type=v["query_type"], error=str(exc))
            error = exc if isinstance(exc, WorkflowQueryFailedError) else WorkflowQueryFailedError(
                f"{type(exc).__name__}: {exc}")
            answer = {"failure": failure_from_exception(ApplicationError(str(error), type="QueryFailed"))}
        return Record(RecordType.EVENT, ValueType.WORKFLOW, WorkflowIntent.QUERY_ANSWERED, {
            "workflow_id": v["workflow_id"], "run_id": v["run_id"], "query_type": v["query_type"], **answer},
            key=task.key, request_id=task.request_id)

    def _result(self, v: dict[str, Any]) -> str:
        definition = self.definitions.get(v["workflow_type"])
        if definition is None:
            raise WorkflowQueryFailedError(not_registered(v["workflow_type"], self.definitions))
        instance = self.cache.peek(v["run_id"])
        if instance is not None:
            self.cached += 1
        else:
            self.replayed += 1
            instance = self.new_instance(definition, self.whole_history(v["workflow_id"], v["run_id"]), v["run_id"])
        return instance.query(v["query_type"], v["input"])
