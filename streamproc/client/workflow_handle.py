"""A handle on a workflow execution: its result, description, history, signals, queries,
cancel and terminate.

Commands about a workflow go to the partition of its id with our replies partition:
DESCRIBE is answered by one DESCRIBED record, GET_HISTORY by HISTORY_PAGE records (one
per page, a long history being several), REQUEST_CANCEL and TERMINATE by their event or
a rejection, SIGNAL by SIGNALED once the signal is recorded, QUERY by the QUERY_ANSWERED
of the worker that ran the handler (or QUERY_REJECTED from the engine). The result is the run's close event, sent by the engine
to our replies partition too (`client/workflow_results.py`: named by our START, or asked
for with WAIT_RESULT), following continue-as-new and retries to the last run as Temporal's
``result()`` does. Only what the engine cannot answer (a run gone from its state) is read
from the events partition of the workflow id: that read holds a consumer of its own for as
long as the run takes, on a thread of the client's pool of event readers; every other call
is a coroutine that holds no thread while it waits (`client/requests.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import orjson

from streamproc.call_arguments import NO_ARG, call_arguments
from streamproc.activity.failures import exception_from_failure
from streamproc.converter import DataConverter
from streamproc.client.errors import (
    CancelledError,
    FailureError,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
    TerminatedError,
    TimeoutError,
    WorkflowContinuedAsNewError,
    WorkflowFailureError,
    WorkflowNotFoundError,
    rejection_error,
)
from streamproc.client.requests import RequestChannel
from streamproc.client.sync_bridge import sync_proxied
from streamproc.client.workflow_events import WorkflowEvent, WorkflowEventScanner
from streamproc.client.workflow_results import CloseWaiter, last_close
from streamproc.protocol.partitioning import partition_for
from streamproc.protocol.records import Record, RecordType, RejectionType, ValueType, WorkflowIntent
from streamproc.semantics import TimeoutType
from streamproc.semantics.workflow_ids import QueryRejectCondition, WorkflowExecutionStatus
from streamproc.client.workflow_updates import WorkflowUpdates
from streamproc.workflow.definition import query_name_of, result_type_of, signal_name_of

if TYPE_CHECKING:
    from streamproc.kafka.replies import Reply

__all__ = ["WorkflowHandle", "WorkflowRequests", "WorkflowHistory", "WorkflowExecutionDescription",
           "outcome_of_close"]

_CONTINUED = "WORKFLOW_EXECUTION_CONTINUED_AS_NEW"


#: Requests the engine answers alike however often they arrive with one request id: a
#: START (the run that request id started), a SIGNAL (recorded once per request id), an
#: UPDATE (applied once per update id), WAIT_RESULT (one waiter per close request id),
#: POLL_UPDATE (one waiter per request id), DESCRIBE and QUERY (read only). They are sent
#: again when a copy reached the log without an answer; the others only when a copy did not.
IDEMPOTENT_INTENTS = frozenset({WorkflowIntent.START, WorkflowIntent.DESCRIBE, WorkflowIntent.QUERY,
                                WorkflowIntent.SIGNAL, WorkflowIntent.UPDATE, WorkflowIntent.POLL_UPDATE,
                                WorkflowIntent.WAIT_RESULT})


@sync_proxied
class WorkflowRequests:
    """Sends workflow commands for a client and waits for their answers on one replies
    partition, across broker outages (`client/requests.py`)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._channel = RequestChannel(client)
        self._readers = ThreadPoolExecutor(max_workers=256, thread_name_prefix="workflow-result")

    async def request(self, intent: str, value: dict[str, Any], rpc_timeout: float, *,
                request_id: str | None = None, accept: Callable[[Record], bool] | None = None,
                not_sent: Callable[[str], Exception] | None = None,
                unknown: Callable[[str, bool | None, float], Exception] | None = None) -> Reply:
        """Send a command about `value["workflow_id"]`; the first reply that is a rejection
        or that `accept`s (any, by default). Raises `RequestOutcomeUnknownError` or
        `RequestNotSentError` (or what `unknown` / `not_sent` build) without one."""

        def on_reply(reply: Reply, answer: Future) -> bool:
            record = reply.record
            if record.record_type is RecordType.COMMAND_REJECTION or accept is None or accept(record):
                if not answer.done():
                    answer.set_result(reply)
                return True
            return False

        return await self._call(intent, value, request_id or uuid.uuid4().hex, on_reply, rpc_timeout,
                                not_sent=not_sent, unknown=unknown)

    async def pages(self, value: dict[str, Any], rpc_timeout: float) -> list[Record] | Record:
        """GET_HISTORY's HISTORY_PAGE records in page order, or its rejection."""
        pages: dict[int, Record] = {}

        def on_reply(reply: Reply, answer: Future) -> bool:
            record = reply.record
            if answer.done():  # the caller gave up (timed out, cancelled) meanwhile
                return True
            if record.record_type is RecordType.COMMAND_REJECTION:
                answer.set_result(record)
                return True
            if record.intent != WorkflowIntent.HISTORY_PAGE:
                return False
            pages[record.value["page"]] = record
            if len(pages) < record.value["pages"]:
                return False
            answer.set_result([pages[n] for n in sorted(pages)])
            return True

        return await self._call(WorkflowIntent.GET_HISTORY, value, uuid.uuid4().hex, on_reply, rpc_timeout)

    async def _call(self, intent: str, value: dict[str, Any], request_id: str,
                    on_reply: Callable[[Reply, Future], bool], rpc_timeout: float, **errors: Any) -> Any:
        return await self._channel.call(
            lambda reply_partition: Record.command(ValueType.WORKFLOW, intent, value, request_id=request_id,
                                                   reply_partition=reply_partition),
            lambda partitions: partition_for(value["workflow_id"], partitions),
            on_reply, rpc_timeout, request_id=request_id, intent=intent,
            idempotent=intent in IDEMPOTENT_INTENTS, **errors)

    async def close_waiter(self, ttl_s: float, timeout: float) -> CloseWaiter:
        """A new request id on our replies partition that a run's closes are sent to."""
        return CloseWaiter(await self._channel.replies(timeout), ttl_s)

    def scanner(self, workflow_id: str, since_ms: int | None) -> WorkflowEventScanner:
        topics = self.client.topics
        return WorkflowEventScanner(self.client.bootstrap, topics.events,
                                    partition_for(workflow_id, self.client.partitions),
                                    since_ms=since_ms, group_prefix=topics.namespace)

    def wait_in_background(self, blocking: Callable[[], Any]) -> Any:
        """Run a blocking read of the events topic (a result wait) on the client's pool of
        event readers: it holds a consumer of its own, as long as the run takes."""
        return asyncio.get_running_loop().run_in_executor(self._readers, blocking)

    def close(self) -> None:
        self._channel.close()
        self._readers.shutdown(wait=False)


@dataclasses.dataclass(frozen=True)
class WorkflowHistory:
    """A run's history events (JSON objects of docs/workflow-protocol.md), in order."""

    workflow_id: str
    events: list[dict[str, Any]]


@dataclasses.dataclass(frozen=True)
class WorkflowExecutionDescription:
    """What DESCRIBE answered; `raw` holds every attribute the engine sent."""

    raw: dict[str, Any]

    @property
    def status(self) -> WorkflowExecutionStatus:
        status = self.raw.get("status", "UNSPECIFIED")
        if isinstance(status, int):
            return WorkflowExecutionStatus(status)
        return WorkflowExecutionStatus[status.removeprefix("WORKFLOW_EXECUTION_STATUS_")]

    @property
    def id(self) -> str:
        return self.raw.get("workflow_id", "")

    @property
    def start_time(self) -> datetime | None:
        return _utc(self.raw.get("start_time_ms"))

    @property
    def execution_time(self) -> datetime | None:
        """When the run's code first ran or will run: the start plus its first-task backoff
        (a start delay, a cron time, a retry backoff)."""
        return _utc(self.raw.get("execution_time_ms"))

    @property
    def close_time(self) -> datetime | None:
        return _utc(self.raw.get("close_time_ms"))

    def __getattr__(self, name: str) -> Any:
        try:
            return self.raw[name]
        except KeyError:
            raise AttributeError(name) from None


@sync_proxied
class WorkflowHandle(WorkflowUpdates):
    """A workflow execution, as Temporal's ``WorkflowHandle``: every call is a coroutine
    (``await handle.result()``); `SyncClient` gives the blocking form."""

    def __init__(self, requests: WorkflowRequests, workflow_id: str, *, run_id: str | None,
                 result_run_id: str | None, first_execution_run_id: str | None,
                 started_log_time_ms: int | None, result_type: type | None = None,
                 close_waiter: CloseWaiter | None = None) -> None:
        self.id = workflow_id
        self.run_id = run_id
        self.result_run_id = result_run_id
        self.first_execution_run_id = first_execution_run_id
        #: The type `result()` decodes the run's result to (a type hint for the data converter).
        self.result_type = result_type
        self._requests = requests
        self._since_ms = started_log_time_ms
        #: Where the engine sends the close of the run we started (until `result()` takes it).
        self._close_waiter = close_waiter

    async def result(self, timeout: float | timedelta | None = None, *, follow_runs: bool = True) -> Any:
        """The result of the run (the last run, following continue-as-new and retries).

        Raises `WorkflowFailureError` whose cause is how the run ended, and `TimeoutError`
        if it did not end within `timeout` seconds.
        """
        seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
        deadline = None if seconds is None else time.monotonic() + seconds
        scope = self._requests.client.result_wait_scope
        with scope() if scope is not None else contextlib.nullcontext():
            found = await last_close(self, deadline, follow_runs)
            if isinstance(found, WorkflowEvent):
                return outcome_of_close(found, self._requests.client.data_converter, self.result_type)
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0)
            return await self._requests.wait_in_background(
                lambda: self._scan_for_result(remaining, follow_runs, found.run_id))

    def take_close_waiter(self) -> CloseWaiter | None:
        """The waiter our START registered, for one `result()` call to use."""
        waiter, self._close_waiter = self._close_waiter, None
        return waiter

    def _scan_for_result(self, seconds: float | None, follow_runs: bool, run_id: str) -> Any:
        """The fallback: read the close from the events partition of the workflow id."""
        with self._requests.scanner(self.id, self._since_ms) as scanner:
            run_id = run_id or self._current_run(scanner)
            for event in scanner.events(self.id, seconds):
                if event.run_id != run_id or not event.is_close:
                    continue
                next_run = event.attributes.get("new_execution_run_id") or ""
                if next_run and follow_runs:
                    run_id = next_run
                    continue
                return outcome_of_close(event, self._requests.client.data_converter, self.result_type)
        raise AssertionError("unreachable: events() ends with TimeoutError")

    def _current_run(self, scanner: WorkflowEventScanner) -> str:
        started = [e for e in scanner.existing(self.id) if e.event_type == "WORKFLOW_EXECUTION_STARTED"]
        if not started:
            raise WorkflowNotFoundError(f"workflow not found for ID: {self.id}")
        # Read again from the start: the current run's close may be among these events.
        scanner.rewind()
        return started[-1].run_id

    async def describe(self, rpc_timeout: float = 30) -> WorkflowExecutionDescription:
        record = await self._command(WorkflowIntent.DESCRIBE, {}, rpc_timeout, WorkflowIntent.DESCRIBED)
        return WorkflowExecutionDescription(orjson.loads(record.value["attributes"] or "{}"))

    async def fetch_history(self, rpc_timeout: float = 30) -> WorkflowHistory:
        """The run's whole history, however many pages the engine sends it in."""
        answer = await self._requests.pages({"workflow_id": self.id, "run_id": self.run_id or ""}, rpc_timeout)
        if isinstance(answer, Record):
            raise _rejection(answer, self.id)
        return WorkflowHistory(self.id, [e for page in answer for e in orjson.loads(page.value["history"])])

    async def fetch_history_events(self, *, rpc_timeout: float = 30) -> AsyncIterator[dict[str, Any]]:
        """The run's history events one by one (``async for``), as Temporal's; each a JSON
        object of docs/workflow-protocol.md."""
        for event in (await self.fetch_history(rpc_timeout)).events:
            yield event

    async def signal(self, signal: str | Callable[..., Any], arg: Any = NO_ARG, *, args: Sequence[Any] = (),
               request_id: str | None = None, rpc_timeout: float = 30) -> None:
        """Send the signal (a name, or the ``@workflow.signal`` method) with its arguments.
        Returns once the run recorded it. Sent again across a broker outage with the same
        `request_id`, it is still recorded once."""
        name = signal_name_of(signal)
        await self._command(WorkflowIntent.SIGNAL, {
            "signal_name": name, "input": self._requests.client.data_converter.encode_args(call_arguments(arg, args)),
            "identity": self._requests.client.identity}, rpc_timeout, WorkflowIntent.SIGNALED, request_id=request_id)

    async def query(self, query: str | Callable[..., Any], arg: Any = NO_ARG, *, args: Sequence[Any] = (),
                    reject_condition: QueryRejectCondition | None = None, rpc_timeout: float = 30,
                    result_type: type | None = None) -> Any:
        """The answer of the query handler (a name, or the ``@workflow.query`` method), run
        by a worker on the run's state. Raises `WorkflowQueryRejectedError` when the run's
        status meets `reject_condition`, `WorkflowQueryFailedError` when the handler raised
        or no worker answered within `rpc_timeout` seconds."""
        name = query_name_of(query)
        converter = self._requests.client.data_converter
        condition = "" if not reject_condition else QueryRejectCondition(reject_condition).name
        reply = await self._requests.request(
            WorkflowIntent.QUERY, {"workflow_id": self.id, "run_id": self.run_id or "", "query_type": name,
                                   "input": converter.encode_args(call_arguments(arg, args)),
                                   "query_reject_condition": condition}, rpc_timeout,
            accept=lambda r: r.intent in (WorkflowIntent.QUERY_ANSWERED, WorkflowIntent.QUERY_REJECTED),
            unknown=lambda message, delivered, until: WorkflowQueryFailedError(
                f"query {name!r} of workflow {self.id!r} was not answered within {rpc_timeout} s: is a workflow "
                f"worker polling the workflow's task queue? ({message})"))
        record = reply.record
        if record.record_type is RecordType.COMMAND_REJECTION:
            if record.rejection_type == RejectionType.INVALID_STATE:  # the run has not run its code yet
                raise WorkflowQueryFailedError(record.rejection_reason or "")
            raise _rejection(record, self.id)
        if record.intent == WorkflowIntent.QUERY_REJECTED:
            status = orjson.loads(record.value["attributes"] or "{}").get("status", "UNSPECIFIED")
            raise WorkflowQueryRejectedError(WorkflowExecutionStatus[status])
        if record.value.get("failure") is not None:
            raise WorkflowQueryFailedError(record.value["failure"].get("message") or "query failed")
        return converter.decode(record.value["result"], result_type or result_type_of(query))

    @property
    def requests(self) -> WorkflowRequests:
        return self._requests

    def rejection(self, record: Record) -> Exception:
        """The exception for the engine's refusal of a command about this workflow."""
        return _rejection(record, self.id)

    async def cancel(self, reason: str = "", rpc_timeout: float = 30) -> None:
        """Ask the run to cancel; the workflow code decides what that means."""
        await self._command(WorkflowIntent.REQUEST_CANCEL, {"reason": reason}, rpc_timeout)

    async def terminate(self, reason: str = "", rpc_timeout: float = 30) -> None:
        """End the run now, without running any more of its code."""
        await self._command(WorkflowIntent.TERMINATE, {"reason": reason}, rpc_timeout)

    async def _command(self, intent: str, value: dict[str, Any], rpc_timeout: float,
                       answer_intent: str | None = None, request_id: str | None = None) -> Record:
        reply = await self._requests.request(
            intent, {"workflow_id": self.id, "run_id": self.run_id or "", **value}, rpc_timeout,
            request_id=request_id, accept=None if answer_intent is None else (lambda r: r.intent == answer_intent))
        if reply.record.record_type is RecordType.COMMAND_REJECTION:
            raise _rejection(reply.record, self.id)
        return reply.record

    def __repr__(self) -> str:
        return f"WorkflowHandle(id={self.id!r}, run_id={self.run_id!r})"



def _utc(ms: int | None) -> datetime | None:
    return None if not ms else datetime.fromtimestamp(ms / 1000, UTC)


def outcome_of_close(event: WorkflowEvent, converter: DataConverter | None = None,
                     result_type: type | None = None) -> Any:
    """The result a close event carries, or the WorkflowFailureError it stands for."""
    converter = converter or DataConverter.default()
    a = event.attributes
    if event.event_type == "WORKFLOW_EXECUTION_COMPLETED":
        return converter.decode(a.get("result"), result_type)
    if event.event_type == _CONTINUED:
        raise WorkflowContinuedAsNewError(a.get("new_execution_run_id", ""))
    cause: FailureError
    if event.event_type == "WORKFLOW_EXECUTION_FAILED":
        cause = exception_from_failure(a.get("failure"), converter=converter) or FailureError("Workflow failed")
    elif event.event_type == "WORKFLOW_EXECUTION_CANCELED":
        cause = CancelledError("Workflow cancelled", *converter.decode_details(a.get("details")))
    elif event.event_type == "WORKFLOW_EXECUTION_TERMINATED":
        cause = TerminatedError(a.get("reason") or "Workflow terminated")
    else:
        cause = TimeoutError("Workflow timed out", type=TimeoutType.START_TO_CLOSE)
    raise WorkflowFailureError(cause=cause, workflow_id=event.workflow_id, run_id=event.run_id)


def _rejection(record: Record, workflow_id: str) -> Exception:
    if record.rejection_type == RejectionType.NOT_FOUND:
        return WorkflowNotFoundError(record.rejection_reason or f"workflow not found for ID: {workflow_id}")
    return rejection_error(record)
