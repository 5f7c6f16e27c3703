"""Start, find and list workflows, as Temporal's asyncio client does::

    client = await Client.connect()
    handle = await client.start_workflow(OrderWorkflow.run, "order-1", id="order-1", task_queue="orders")
    print(await handle.result(timeout=60))

These are methods of `Client` (mixed in here so the job client stays small). START
goes to the partition of the workflow id with our replies partition, so its answer
(STARTED with the run id, or the rejection) comes back at once. Arguments are checked
here with the engine's own rules and messages first, so a bad timeout raises the same
`InvalidArgument` before sending that the engine would answer with.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from streamproc.call_arguments import NO_ARG, call_arguments, timeout_option
from streamproc.client.errors import (
    InvalidArgument,
    WorkflowAlreadyStartedError,
    WorkflowNotStartedError,
    WorkflowStartOutcomeUnknownError,
    rejection_error,
)
from streamproc.protocol.wire_values import ceil_ms, retry_policy_record
from streamproc.client.lazy_channels import OpenedOnFirstUse
from streamproc.client.temporal_gaps import LIST_OPTIONS, START_OPTIONS, refuse_options
from streamproc.client.workflow_handle import WorkflowHandle, WorkflowRequests
from streamproc.client.workflow_results import STARTER_WAIT_S
from streamproc.client.workflow_listing import ExecutionSummary, WorkflowExecutionCount, list_executions
from streamproc.protocol.limits import MAX_PAYLOAD_BYTES
from streamproc.protocol.records import RecordType, RejectionType, WorkflowIntent
from streamproc.protocol.topics import check_task_queue
from streamproc.semantics import RetryPolicy, normalize_workflow_retry_policy
from streamproc.semantics.workflow_ids import (
    WorkflowIdConflictPolicy,
    WorkflowIdReusePolicy,
    normalize_workflow_id_policies,
    validate_workflow_id,
)
from streamproc.semantics.cron_workflow import validate_cron_schedule
from streamproc.semantics.workflow_timeouts import (
    WorkflowTimeouts,
    normalize_workflow_timeouts,
    validate_workflow_start_delay,
)
from streamproc.workflow.definition import result_type_of, signal_name_of, workflow_type_of

__all__ = ["WorkflowOperations", "workflow_type_of"]

_RUN_ID = re.compile(r"RunId: ([^,.\s]+)")


class WorkflowOperations:
    """The workflow methods of `Client`; uses its `send`, `partitions`, `topics`, `bootstrap`,
    `data_converter`."""

    _workflow_requests: WorkflowRequests | None = None
    #: Workflow requests and their replies, shared by the handles.
    workflow_requests = OpenedOnFirstUse(WorkflowRequests)

    async def start_workflow(
            self, workflow: str | Callable[..., Any], arg: Any = NO_ARG, *, id: str, task_queue: str,
            args: Sequence[Any] = (), execution_timeout: timedelta | None = None,
            run_timeout: timedelta | None = None, task_timeout: timedelta | None = None,
            retry_policy: RetryPolicy | None = None,
            id_reuse_policy: WorkflowIdReusePolicy = WorkflowIdReusePolicy.ALLOW_DUPLICATE,
            id_conflict_policy: WorkflowIdConflictPolicy = WorkflowIdConflictPolicy.UNSPECIFIED,
            memo: Mapping[str, Any] | None = None, search_attributes: Mapping[str, Any] | None = None,
            cron_schedule: str = "", start_delay: timedelta | None = None, result_type: type | None = None,
            identity: str = "", request_id: str | None = None,
            start_signal: str | Callable[..., Any] | None = None, start_signal_args: Sequence[Any] = (),
            rpc_timeout: float | timedelta = 30, **temporal_options: Any) -> WorkflowHandle:
        """Start a run of `workflow` (``MyWorkflow.run``, the class, or the type name).

        With `cron_schedule` (robfig/cron syntax: ``"0 9 * * MON-FRI"``, ``"@every 1h"``,
        ``"CRON_TZ=Europe/Berlin 0 2 * * *"``; UTC unless a zone is given) it is a cron
        workflow: the first run waits for the first cron time after the start, each run
        is followed by the next at the next cron time, until cancelled, terminated or
        its execution timeout; `result()` follows the runs, and decodes the result as
        `result_type`, by default the run method's return annotation.

        Raises `InvalidArgument`, `WorkflowAlreadyStartedError` (the id is taken under
        the policies). Across a broker outage the START is sent again with the same
        `request_id` (the engine answers a repeated one with the run it started) until
        `rpc_timeout` seconds passed; then `WorkflowStartOutcomeUnknownError` (it may have
        started: it carries `workflow_id` and `request_id` to look it up) or, only when the
        START certainly never reached the log, `WorkflowNotStartedError`.

        With `start_delay` the run starts at once (``describe()`` shows it running, its
        ``execution_time_ms`` the start plus the delay) and its code first runs after
        the delay; a signal (`start_signal` on a run already waiting), an update or a
        cancel request do not wait for it, a plain signal does, as on a Temporal server.
        Not with `cron_schedule`.

        `memo` and `search_attributes` are JSON objects kept with the run (`describe()`
        shows them); `result_type` is the type `result()` decodes to. Temporal options we
        do not implement (`request_eager_start`, ...) raise NotImplementedError naming them.
        """
        refuse_options("start_workflow", temporal_options, START_OPTIONS)
        rpc_timeout = seconds_of(rpc_timeout)
        workflow_type = workflow_type_of(workflow)
        args = call_arguments(arg, args)
        requested = WorkflowTimeouts(*(timeout_option(v, name) for v, name in (
            (execution_timeout, "execution_timeout"), (run_timeout, "run_timeout"),
            (task_timeout, "task_timeout"))))
        validate_workflow_id(id)
        problem = (None if workflow_type else "WorkflowType is not set on request.") or check_task_queue(task_queue)
        if problem:
            raise InvalidArgument(problem)
        normalize_workflow_timeouts(requested)
        signal_name = signal_name_of(start_signal) if start_signal is not None else ""
        normalize_workflow_id_policies(WorkflowIdReusePolicy(id_reuse_policy),
                                       WorkflowIdConflictPolicy(id_conflict_policy),
                                       signal_with_start=bool(signal_name))
        normalize_workflow_retry_policy(retry_policy)
        validate_cron_schedule(cron_schedule, datetime.now(UTC))
        validate_workflow_start_delay(cron_schedule, None if start_delay is None else timeout_option(start_delay,
                                                                                                "start_delay"))
        attributes = {name: dict(value) for name, value in (("memo", memo), ("search_attributes", search_attributes))
                      if value is not None}
        check_attribute_sizes(attributes)
        value = {
            "workflow_id": id, "workflow_type": workflow_type, "task_queue": task_queue,
            "input": self.data_converter.encode_args(args),
            "workflow_execution_timeout_ms": ceil_ms(requested.execution),
            "workflow_run_timeout_ms": ceil_ms(requested.run),
            "workflow_task_timeout_ms": ceil_ms(requested.task),
            "retry_policy": None if retry_policy is None else retry_policy_record(retry_policy),
            "id_reuse_policy": _policy_name(WorkflowIdReusePolicy(id_reuse_policy)),
            "id_conflict_policy": _policy_name(WorkflowIdConflictPolicy(id_conflict_policy)),
            "identity": identity,
            "signal_name": signal_name,
            "signal_input": self.data_converter.encode_args(start_signal_args) if signal_name else None,
            "cron_schedule": cron_schedule,
            "start_delay_ms": None if start_delay is None else ceil_ms(start_delay),
            "attributes": orjson.dumps(attributes).decode() if attributes else None,
        }
        request_id = request_id or uuid.uuid4().hex
        # The run's close comes to our replies partition (`client/workflow_results.py`):
        # listened for from before the START goes out, so no close is missed.
        try:
            waiter = await self.workflow_requests.close_waiter(STARTER_WAIT_S, rpc_timeout)
        except TimeoutError as exc:  # as the START's own call says it, when the broker is away
            raise WorkflowNotStartedError(
                f"START (request id {request_id}) not sent: the broker did not answer within {rpc_timeout} s ({exc})",
                workflow_id=id, intent=WorkflowIntent.START, request_id=request_id) from None
        value["close_reply"] = waiter.target()
        try:
            reply = await self._send_start(value, rpc_timeout, request_id, workflow_type)
        except BaseException:
            waiter.close()
            raise
        record = reply.record
        if record.record_type is RecordType.COMMAND_REJECTION or not orjson.loads(
                record.value["attributes"] or "{}").get("close_reply"):
            waiter.close()  # refused, or the run has no room for another waiter: result() asks
            waiter = None
        if record.record_type is RecordType.COMMAND_REJECTION:
            reason = record.rejection_reason or ""
            if record.rejection_type == RejectionType.ALREADY_EXISTS:
                found = _RUN_ID.search(reason)
                raise WorkflowAlreadyStartedError(reason, workflow_id=id, workflow_type=workflow_type,
                                                  run_id=found.group(1) if found else "")
            raise rejection_error(record)
        run_id = record.value["run_id"]
        return WorkflowHandle(self.workflow_requests, id, run_id=run_id, result_run_id=run_id,
                              first_execution_run_id=run_id, started_log_time_ms=reply.log_time_ms,
                              result_type=result_type if result_type is not None else result_type_of(workflow),
                              close_waiter=waiter)

    async def _send_start(self, value: dict[str, Any], rpc_timeout: float, request_id: str, workflow_type: str):
        id = value["workflow_id"]
        return await self.workflow_requests.request(
            WorkflowIntent.START, value, rpc_timeout, request_id=request_id,
            accept=lambda r: r.intent == WorkflowIntent.STARTED,
            not_sent=lambda message: WorkflowNotStartedError(message, workflow_id=id, intent=WorkflowIntent.START,
                                                             request_id=request_id),
            unknown=lambda message, delivered, until: WorkflowStartOutcomeUnknownError(
                f"{message}; the workflow {id!r} may have started: look it up with "
                f"get_workflow_handle({id!r}).describe(), or start it again with request_id={request_id!r}",
                workflow_id=id, workflow_type=workflow_type, intent=WorkflowIntent.START,
                request_id=request_id, delivered=delivered, may_land_until=until))

    async def execute_workflow(self, workflow: str | Callable[..., Any], arg: Any = NO_ARG, *,
                               result_timeout: float | None = None, **options: Any) -> Any:
        """Start a run and wait for its result (follows continue-as-new and retries)."""
        handle = await self.start_workflow(workflow, arg, **options)
        return await handle.result(result_timeout)

    def get_workflow_handle(self, workflow_id: str, *, run_id: str | None = None,
                            first_execution_run_id: str | None = None,
                            result_type: type | None = None) -> WorkflowHandle:
        """A handle on a workflow started elsewhere: its `run_id`, or its current run."""
        return WorkflowHandle(self.workflow_requests, workflow_id, run_id=run_id, result_run_id=run_id,
                              first_execution_run_id=first_execution_run_id, started_log_time_ms=None,
                              result_type=result_type)

    def get_workflow_handle_for(self, workflow: Callable[..., Any], workflow_id: str, *,
                                run_id: str | None = None, first_execution_run_id: str | None = None,
                                result_type: type | None = None) -> WorkflowHandle:
        """`get_workflow_handle` typed by the workflow's run method (``MyWorkflow.run``), as Temporal's."""
        workflow_type_of(workflow)  # a method that is no workflow's run fails here, not later
        return self.get_workflow_handle(workflow_id, run_id=run_id, first_execution_run_id=first_execution_run_id,
                                        result_type=result_type if result_type is not None else result_type_of(workflow))

    async def list_workflows(self, query: str | None = None, *, limit: int | None = None, page_size: int = 1000,
                             rpc_timeout: float | timedelta = 30,
                             **temporal_options: Any) -> AsyncIterator[ExecutionSummary]:
        """Every run the events topic holds (its retention), newest start first, as
        `ExecutionSummary` rows (at most `limit`). A visibility `query` is not implemented."""
        refuse_options("list_workflows", {"query": query, **temporal_options}, LIST_OPTIONS)
        timeout = seconds_of(rpc_timeout)
        partitions = self.known_partitions or await asyncio.to_thread(self.partition_count, timeout)
        runs = await asyncio.to_thread(list_executions, self.bootstrap, self.topics.events, partitions,
                                       self.topics.namespace, timeout)
        for run in runs[:limit]:
            yield run

    async def count_workflows(self, query: str | None = None, *, rpc_timeout: float | timedelta = 30,
                              **temporal_options: Any) -> WorkflowExecutionCount:
        """How many runs `list_workflows` would list. A visibility `query` is not implemented."""
        refuse_options("count_workflows", {"query": query, **temporal_options}, LIST_OPTIONS)
        return WorkflowExecutionCount(len([run async for run in self.list_workflows(rpc_timeout=rpc_timeout)]))

    def close_workflow_requests(self) -> None:
        WorkflowOperations.workflow_requests.close_on(self)


def seconds_of(value: float | timedelta) -> float:
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def check_attribute_sizes(attributes: Mapping[str, Any]) -> None:
    """A memo or search attributes too large for a command, refused before sending."""
    for name, value in attributes.items():
        size = len(orjson.dumps(value))
        if size > MAX_PAYLOAD_BYTES:
            raise InvalidArgument(f"{name} is {size} bytes, more than the limit of {MAX_PAYLOAD_BYTES}")


def _policy_name(policy: WorkflowIdReusePolicy | WorkflowIdConflictPolicy) -> str:
    return "" if policy.value == 0 else policy.name

