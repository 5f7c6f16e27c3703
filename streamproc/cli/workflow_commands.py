"""`streamproc workflow start|result|describe|show|cancel|terminate|list` (signal, query and
stack are in `workflow_messages.py`).

Options are named as Temporal's CLI names them (``--workflow-id/-w``, ``--type``,
``--task-queue/-t``, ``--input/-i``, ``--run-id/-r``). Every command prints a human
table by default and one JSON document with ``--output json``. A run that did not
complete makes ``result`` exit with status 1.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import click
import orjson

from streamproc.cli.params import json_value
from streamproc.client.client import Client
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

_OUTPUT = click.option("--output", "-o", type=click.Choice(["table", "json"]), default="table",
                       show_default=True, help="Human table or one JSON document.")
_WORKFLOW_ID = click.option("--workflow-id", "-w", required=True, help="Workflow id.")
_RUN_ID = click.option("--run-id", "-r", default=None, help="Run id (default: the current run).")


def _which_run(command):
    """The options naming the run a command is about: ``--workflow-id`` and ``--run-id``."""
    return _WORKFLOW_ID(_RUN_ID(command))


def _seconds(name: str, default: str = "none"):
    return click.option(f"--{name}", type=click.FloatRange(0), default=None,
                        help=f"{name.replace('-', ' ').capitalize()} in seconds (default: {default}).")


def _echo_json(value: Any) -> None:
    click.echo(orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode())


def _table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> None:
    cells = [list(header)] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for row in cells:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())


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
@_seconds("execution-timeout")
@_seconds("run-timeout")
@_seconds("task-timeout", "10")
@click.option("--id-reuse-policy", type=click.Choice([p.name for p in WorkflowIdReusePolicy][1:]),
              default="ALLOW_DUPLICATE", show_default=True)
@click.option("--id-conflict-policy", type=click.Choice([p.name for p in WorkflowIdConflictPolicy][1:]),
              default=None, help="What to do if the id is running (default FAIL).")
@click.option("--cron", "cron_schedule", default="",
              help="Cron schedule of a cron workflow, e.g. '0 9 * * MON-FRI', '@every 1h', "
                   "'CRON_TZ=Europe/Berlin 0 2 * * *' (robfig/cron syntax, UTC by default).")
@_OUTPUT
def workflow_start(workflow_type: str, task_queue: str, workflow_id: str, inputs: tuple[str, ...],
                   execution_timeout: float | None, run_timeout: float | None, task_timeout: float | None,
                   id_reuse_policy: str, id_conflict_policy: str | None, cron_schedule: str, output: str) -> None:
    """Start a run of a workflow (a chain of runs with --cron); prints its workflow id and run id."""
    def duration(seconds: float | None) -> timedelta | None:
        return None if seconds is None else timedelta(seconds=seconds)

    with Client() as client:
        handle = _guarded(lambda: client.start_workflow(
            workflow_type, args=[json_value(text) for text in inputs], id=workflow_id, task_queue=task_queue,
            execution_timeout=duration(execution_timeout), run_timeout=duration(run_timeout),
            task_timeout=duration(task_timeout), id_reuse_policy=WorkflowIdReusePolicy[id_reuse_policy],
            id_conflict_policy=WorkflowIdConflictPolicy[id_conflict_policy or "UNSPECIFIED"],
            cron_schedule=cron_schedule, identity="streamproc-cli"))
    if output == "json":
        _echo_json({"workflow_id": handle.id, "run_id": handle.run_id, "workflow_type": workflow_type})
    else:
        _table([[handle.id, handle.run_id, workflow_type]], ["WORKFLOW ID", "RUN ID", "TYPE"])


@workflow.command("result")
@_which_run
@click.option("--timeout", type=click.FloatRange(0), default=None, help="Seconds to wait (default: forever).")
@_OUTPUT
def workflow_result(workflow_id: str, run_id: str | None, timeout: float | None, output: str) -> None:
    """Wait for the run to close (following continue-as-new and retries); print its result."""
    with Client() as client:
        handle = client.get_workflow_handle(workflow_id, run_id=run_id)
        try:
            value, failure = handle.result(timeout), None
        except WorkflowFailureError as exc:
            value, failure = None, exc.cause
        except TimeoutError as exc:
            raise click.ClickException(str(exc)) from None
    status = "COMPLETED" if failure is None else type(failure).__name__
    if output == "json":
        _echo_json({"workflow_id": workflow_id, "status": status, "result": value,
                    "failure": None if failure is None else _failure_json(failure)})
    elif failure is None:
        click.echo(orjson.dumps(value).decode())
    else:
        click.echo(f"workflow did not complete: {type(failure).__name__}: {failure}", err=True)
    if failure is not None:
        raise SystemExit(1)


@workflow.command("describe")
@_which_run
@_OUTPUT
def workflow_describe(workflow_id: str, run_id: str | None, output: str) -> None:
    """Show the run's status, type, times and pending work."""
    with Client() as client:
        description = _guarded(lambda: client.get_workflow_handle(workflow_id, run_id=run_id).describe())
    if output == "json":
        _echo_json(description.raw)
    else:
        _table([[k, _show(k, v)] for k, v in description.raw.items()], ["FIELD", "VALUE"])


@workflow.command("show")
@_which_run
@_OUTPUT
def workflow_show(workflow_id: str, run_id: str | None, output: str) -> None:
    """Print the run's event history."""
    with Client() as client:
        history = _guarded(lambda: client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history())
    if output == "json":
        _echo_json({"workflow_id": workflow_id, "events": history.events})
        return
    _table([[e["event_id"], _time(e.get("event_time_ms")), e["event_type"],
             orjson.dumps(e.get("attributes") or {}).decode()[:120]] for e in history.events],
           ["ID", "TIME", "TYPE", "ATTRIBUTES"])


@workflow.command("cancel")
@_which_run
@click.option("--reason", default="", help="Why, recorded with the request.")
def workflow_cancel(workflow_id: str, run_id: str | None, reason: str) -> None:
    """Request cancellation: the workflow code decides how to end."""
    with Client() as client:
        _guarded(lambda: client.get_workflow_handle(workflow_id, run_id=run_id).cancel(reason))
    click.echo(f"cancellation requested for {workflow_id}")


@workflow.command("terminate")
@_which_run
@click.option("--reason", default="", help="Why, recorded on WorkflowExecutionTerminated.")
def workflow_terminate(workflow_id: str, run_id: str | None, reason: str) -> None:
    """End the run at once, running no more of its code."""
    with Client() as client:
        _guarded(lambda: client.get_workflow_handle(workflow_id, run_id=run_id).terminate(reason))
    click.echo(f"terminated {workflow_id}")


@workflow.command("list")
@click.option("--workflow-type", "--type", "workflow_type", default=None, help="Only runs of this type.")
@click.option("--status", type=click.Choice(["RUNNING", "COMPLETED", "FAILED", "CANCELED", "TERMINATED",
                                             "CONTINUED_AS_NEW", "TIMED_OUT"]), default=None)
@_OUTPUT
def workflow_list(workflow_type: str | None, status: str | None, output: str) -> None:
    """List the runs the events topic still holds, newest first."""
    from streamproc.client.workflow_listing import list_executions

    with Client() as client:
        runs = list_executions(client.bootstrap, client.topics.events, client.partitions,
                               group_prefix=client.topics.namespace)
    runs = [r for r in runs if (workflow_type is None or r.workflow_type == workflow_type)
            and (status is None or r.status.name == status)]
    if output == "json":
        _echo_json([r.as_dict() for r in runs])
        return
    _table([[r.workflow_id, r.run_id, r.workflow_type, r.status.name, _time(r.start_time_ms),
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


def _show(key: str, value: Any) -> str:
    if key.endswith("_time_ms") and isinstance(value, int):
        return _time(value)
    return value if isinstance(value, str) else orjson.dumps(value).decode()
