"""`streamproc workflow start|result|describe|show|cancel|terminate|list` (signal, query and
stack are in `workflow_messages.py`).

Options are named as Temporal's CLI names them (``--workflow-id/-w``, ``--type``,
``--task-queue/-t``, ``--input/-i``, ``--run-id/-r``). Every command prints a human
table by default and one JSON document with ``--output json``. A run that did not
complete makes ``result`` exit with status 1.
"""

from __future__ import annotations

import datetime
from datetime import timedelta
from typing import Any

import click
import orjson

from streamproc.cli.connect import connected_client
from streamproc.cli.output import OUTPUT, echo_json, echo_table
from streamproc.cli.params import DURATION, Duration, json_value
from streamproc.client.errors import (
    CommandRejectedError,
    FailureError,
    RequestNotSentError,
    WorkflowFailureError,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
    WorkflowUpdateFailedError,
)
from streamproc.semantics.workflow_ids import (
    WorkflowIdConflictPolicy,
    WorkflowIdReusePolicy,
)

_WORKFLOW_ID = click.option("--workflow-id", "-w", required=True, help="Workflow id.")
_RUN_ID = click.option("--run-id", "-r", default=None, help="Run id (default: the current run).")


def _which_run(command):
    """The options naming the run a command is about: ``--workflow-id`` and ``--run-id``."""
    return _WORKFLOW_ID(_RUN_ID(command))


def _duration(name: str, default: str = "none"):
    return click.option(f"--{name}", type=Duration(allow_none=True), default=None,
                        help=f"{name.replace('-', ' ').capitalize()}, e.g. 30s, 1h30m, 7d (default: {default}).")


def _time(ms: int | None) -> str:
    if not ms:
        return ""
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).isoformat(timespec="milliseconds")


@click.group()
def workflow() -> None:
    """Start, inspect, cancel and terminate workflow executions."""


@workflow.command("start")
@click.option("--type", "workflow_type", required=True, help="Workflow type name.")
@click.option("--task-queue", "-t", required=True)
@_WORKFLOW_ID
@click.option("--input", "-i", "inputs", multiple=True,
              help="JSON value of an argument; repeat for several arguments.")
@_duration("execution-timeout")
@_duration("run-timeout")
@_duration("task-timeout", "10")
@click.option("--id-reuse-policy", type=click.Choice([p.name for p in WorkflowIdReusePolicy][1:]),
              default="ALLOW_DUPLICATE", show_default=True)
@click.option("--id-conflict-policy", type=click.Choice([p.name for p in WorkflowIdConflictPolicy][1:]),
              default=None, help="What to do if the id is running (default FAIL).")
@click.option("--cron", "cron_schedule", default="",
              help="Cron schedule of a cron workflow, e.g. '0 9 * * MON-FRI', '@every 1h', "
                   "'CRON_TZ=Europe/Berlin 0 2 * * *' (robfig/cron syntax, UTC by default).")
@click.option("--start-delay", type=DURATION, default=None,
              help="Run the workflow's code only after this delay, e.g. 30s, 1h (the run starts at once; "
                   "not with --cron).")
@OUTPUT
def workflow_start(workflow_type: str, task_queue: str, workflow_id: str, inputs: tuple[str, ...],
                   execution_timeout: timedelta | None, run_timeout: timedelta | None,
                   task_timeout: timedelta | None, id_reuse_policy: str, id_conflict_policy: str | None,
                   cron_schedule: str, start_delay: timedelta | None, output: str) -> None:
    """Start a run of a workflow (a chain of runs with --cron, a delayed first task with
    --start-delay); prints its workflow id and run id."""
    with connected_client() as client:
        handle = _guarded(lambda: client.start_workflow(
            workflow_type, args=[json_value(text) for text in inputs], id=workflow_id, task_queue=task_queue,
            execution_timeout=execution_timeout, run_timeout=run_timeout, task_timeout=task_timeout, id_reuse_policy=WorkflowIdReusePolicy[id_reuse_policy],
            id_conflict_policy=WorkflowIdConflictPolicy[id_conflict_policy or "UNSPECIFIED"],
            cron_schedule=cron_schedule, start_delay=start_delay, identity="streamproc-cli"))
    if output != "table":
        echo_json({"workflow_id": handle.id, "run_id": handle.run_id, "workflow_type": workflow_type}, output)
    else:
        echo_table([[handle.id, handle.run_id, workflow_type]], ["WORKFLOW ID", "RUN ID", "TYPE"])


@workflow.command("result")
@_which_run
@click.option("--timeout", type=DURATION, default=None, help="How long to wait, e.g. 30s, 5m (default: forever).")
@OUTPUT
def workflow_result(workflow_id: str, run_id: str | None, timeout: timedelta | None, output: str) -> None:
    """Wait for the run to close (following continue-as-new and retries); print its result."""
    with connected_client() as client:
        handle = client.get_workflow_handle(workflow_id, run_id=run_id)
        try:
            value, failure = handle.result(None if timeout is None else timeout.total_seconds()), None
        except WorkflowFailureError as exc:
            value, failure = None, exc.cause
        except TimeoutError as exc:
            raise click.ClickException(str(exc)) from None
    status = "COMPLETED" if failure is None else type(failure).__name__
    if output != "table":
        echo_json({"workflow_id": workflow_id, "status": status, "result": value,
                    "failure": None if failure is None else _failure_json(failure)}, output)
    elif failure is None:
        click.echo(orjson.dumps(value).decode())
    else:
        click.echo(f"workflow did not complete: {type(failure).__name__}: {failure}", err=True)
    if failure is not None:
        raise SystemExit(1)


@workflow.command("describe")
@_which_run
@OUTPUT
def workflow_describe(workflow_id: str, run_id: str | None, output: str) -> None:
    """Show the run grouped as Temporal's CLI does: execution info, pending activities,
    pending timers, last failure."""
    from streamproc.cli.workflow_description import echo_description

    with connected_client() as client:
        handle = client.get_workflow_handle(workflow_id, run_id=run_id)
        description = _guarded(handle.describe)
        close_failure = None
        if description.raw.get("status") in ("FAILED", "TIMED_OUT") and output == "table":
            history = _guarded(handle.fetch_history)
            close_failure = (history.events[-1].get("attributes") or {}).get("failure") if history.events else None
    if output != "table":
        echo_json(description.raw, output)
    else:
        echo_description(description.raw, close_failure)


@workflow.command("show")
@_which_run
@OUTPUT
def workflow_show(workflow_id: str, run_id: str | None, output: str) -> None:
    """Print the run's event history."""
    with connected_client() as client:
        history = _guarded(lambda: client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history())
    if output != "table":
        echo_json(history.events if output == "jsonl" else {"workflow_id": workflow_id, "events": history.events},
                  output)
        return
    echo_table([[e["event_id"], _time(e.get("event_time_ms")), e["event_type"],
             orjson.dumps(e.get("attributes") or {}).decode()[:120]] for e in history.events],
           ["ID", "TIME", "TYPE", "ATTRIBUTES"])


NO_WAIT = click.option("--no-wait", is_flag=True,
                       help="Only put the command on the log; do not wait for the engine's answer.")


def send_only(client, intent: str, workflow_id: str, run_id: str | None, **value: Any) -> None:
    """Put a workflow command on the log and return: no reply partition, so no answer (a
    refusal shows on the events topic only)."""
    import uuid

    from streamproc.protocol.partitioning import partition_for
    from streamproc.protocol.records import Record, ValueType

    record = Record.command(ValueType.WORKFLOW, intent, {"workflow_id": workflow_id, "run_id": run_id or "",
                                                         "identity": client.identity, **value},
                            request_id=uuid.uuid4().hex)
    client.send(record, partition_for(workflow_id, _guarded(lambda: client.partitions)))


def _cancel_or_terminate(intent: str, workflow_id: str, run_id: str | None, reason: str, no_wait: bool) -> None:
    with connected_client(identity="streamproc-cli") as client:
        if no_wait:
            send_only(client, intent, workflow_id, run_id, reason=reason)
            click.echo(f"{intent} sent for {workflow_id}")
            return
        handle = client.get_workflow_handle(workflow_id, run_id=run_id)
        _guarded(lambda: (handle.cancel if intent == "REQUEST_CANCEL" else handle.terminate)(reason))
    click.echo(f"cancellation requested for {workflow_id}" if intent == "REQUEST_CANCEL" else f"terminated {workflow_id}")


@workflow.command("cancel")
@_which_run
@click.option("--reason", default="", help="Why, recorded with the request.")
@NO_WAIT
def workflow_cancel(workflow_id: str, run_id: str | None, reason: str, no_wait: bool) -> None:
    """Request cancellation: the workflow code decides how to end."""
    _cancel_or_terminate("REQUEST_CANCEL", workflow_id, run_id, reason, no_wait)


@workflow.command("terminate")
@_which_run
@click.option("--reason", default="", help="Why, recorded on WorkflowExecutionTerminated.")
@NO_WAIT
def workflow_terminate(workflow_id: str, run_id: str | None, reason: str, no_wait: bool) -> None:
    """End the run at once, running no more of its code."""
    _cancel_or_terminate("TERMINATE", workflow_id, run_id, reason, no_wait)


@workflow.command("list")
@click.option("--workflow-type", "--type", "workflow_type", default=None, help="Only runs of this type.")
@click.option("--status", type=click.Choice(["RUNNING", "COMPLETED", "FAILED", "CANCELED", "TERMINATED",
                                             "CONTINUED_AS_NEW", "TIMED_OUT"]), default=None)
@OUTPUT
def workflow_list(workflow_type: str | None, status: str | None, output: str) -> None:
    """List the runs the events topic still holds, newest first."""
    from streamproc.client.workflow_listing import list_executions

    with connected_client() as client:
        runs = list_executions(client.bootstrap, client.topics.events, client.partitions,
                               group_prefix=client.topics.namespace)
    runs = [r for r in runs if (workflow_type is None or r.workflow_type == workflow_type)
            and (status is None or r.status.name == status)]
    if output != "table":
        echo_json([r.as_dict() for r in runs], output)
        return
    echo_table([[r.workflow_id, r.run_id, r.workflow_type, r.status.name, _time(r.start_time_ms),
             _time(r.close_time_ms)] for r in runs],
           ["WORKFLOW ID", "RUN ID", "TYPE", "STATUS", "START TIME", "CLOSE TIME"])


def _guarded(call):
    """Run a client call; an error the user can act on becomes a message, not a traceback."""
    try:
        return call()
    except WorkflowUpdateFailedError as exc:
        raise click.ClickException(f"{exc}: {exc.cause}") from None
    except (FailureError, TimeoutError, ValueError, RequestNotSentError, CommandRejectedError,
            WorkflowQueryFailedError, WorkflowQueryRejectedError) as exc:
        raise click.ClickException(str(exc)) from None


def _failure_json(error: BaseException) -> dict[str, Any]:
    out = {"type": type(error).__name__, "message": str(error)}
    for name in ("type", "non_retryable", "details"):
        value = getattr(error, name, None)
        if value is not None:
            out["error_type" if name == "type" else name] = list(value) if name == "details" else value
    if error.__cause__ is not None:
        out["cause"] = _failure_json(error.__cause__)
    return out

