"""`streamproc workflow signal|query|update|update-result|stack`: talk to a running (or, for
queries and update results, closed) run.

Named as Temporal's CLI names them: ``signal --name``, ``query --type``, ``update --name``
(``--update-id``), ``update-result --update-id`` (Temporal's ``workflow update result``),
``stack`` (the built-in ``__stack_trace`` query); arguments are JSON values, one
``--input`` each.
"""

from __future__ import annotations

import click
import orjson

from datetime import timedelta

from streamproc.cli.connect import connected_client
from streamproc.cli.output import OUTPUT, echo_json
from streamproc.cli.params import DURATION, json_value
from streamproc.cli.workflow_commands import NO_WAIT, _guarded, _which_run, send_only, workflow
from streamproc.semantics.workflow_ids import QueryRejectCondition

_INPUTS = click.option("--input", "-i", "inputs", multiple=True,
                       help="JSON value of an argument; repeat for several arguments.")


def _echo_answer(output: str, answer: dict) -> None:
    """A query's or an update's answer: its result as compact JSON, or with ``--output json``
    the whole answer (which run, which query or update, the result)."""
    if output != "table":
        echo_json(answer, output)
    else:
        click.echo(orjson.dumps(answer["result"]).decode())


@workflow.command("signal")
@_which_run
@click.option("--name", required=True, help="Signal name.")
@_INPUTS
@NO_WAIT
def workflow_signal(workflow_id: str, run_id: str | None, name: str, inputs: tuple[str, ...], no_wait: bool) -> None:
    """Send a signal; returns once the run recorded it (with --no-wait: once it is sent)."""
    with connected_client(identity="streamproc-cli") as client:
        if no_wait:
            send_only(client, "SIGNAL", workflow_id, run_id, signal_name=name,
                      input=client.data_converter.encode_args([json_value(text) for text in inputs]))
            click.echo(f"signal {name} sent to {workflow_id} (not waiting for it to be recorded)")
            return
        _guarded(lambda: client.get_workflow_handle(workflow_id, run_id=run_id).signal(
            name, args=[json_value(text) for text in inputs]))
    click.echo(f"signal {name} sent to {workflow_id}")


@workflow.command("query")
@_which_run
@click.option("--type", "query_type", required=True, help="Query name.")
@_INPUTS
@click.option("--reject-condition", type=click.Choice([c.name for c in QueryRejectCondition if c]), default=None,
              help="Refuse the query when the run is not open (NOT_OPEN) or did not complete (NOT_COMPLETED_CLEANLY).")
@click.option("--timeout", type=DURATION, default="30s", show_default=True,
              help="How long to wait for a worker's answer.")
@OUTPUT
def workflow_query(workflow_id: str, run_id: str | None, query_type: str, inputs: tuple[str, ...],
                   reject_condition: str | None, timeout: timedelta, output: str) -> None:
    """Ask the workflow's code (through a worker) a question about its state."""
    with connected_client() as client:
        result = _guarded(lambda: client.get_workflow_handle(workflow_id, run_id=run_id).query(
            query_type, args=[json_value(text) for text in inputs],
            reject_condition=QueryRejectCondition[reject_condition] if reject_condition else None,
            rpc_timeout=timeout.total_seconds()))
    _echo_answer(output, {"workflow_id": workflow_id, "query_type": query_type, "result": result})


@workflow.command("update")
@_which_run
@click.option("--name", required=True, help="Update name.")
@_INPUTS
@click.option("--update-id", default=None, help="Update id (default: a new one); the same id is applied once.")
@click.option("--timeout", type=DURATION, default="60s", show_default=True,
              help="How long to wait for the update's result.")
@OUTPUT
def workflow_update(workflow_id: str, run_id: str | None, name: str, inputs: tuple[str, ...],
                    update_id: str | None, timeout: timedelta, output: str) -> None:
    """Send an update and wait for its result (the workflow's validator may reject it)."""
    with connected_client(identity="streamproc-cli") as client:
        handle = client.get_workflow_handle(workflow_id, run_id=run_id)
        result = _guarded(lambda: handle.execute_update(name, args=[json_value(text) for text in inputs],
                                                        id=update_id, timeout=timeout.total_seconds()))
    _echo_answer(output, {"workflow_id": workflow_id, "update_name": name, "result": result})


@workflow.command("update-result")
@_which_run
@click.option("--update-id", required=True, help="The update's id.")
@click.option("--timeout", type=DURATION, default="60s", show_default=True,
              help="How long to wait for the update's outcome.")
@OUTPUT
def workflow_update_result(workflow_id: str, run_id: str | None, update_id: str, timeout: timedelta,
                           output: str) -> None:
    """Wait for the result of an update sent before, by anyone (Temporal's `workflow update result`)."""
    with connected_client() as client:
        update = client.get_workflow_handle(workflow_id, run_id=run_id).get_update_handle(update_id)
        result = _guarded(lambda: update.result(timeout=timeout.total_seconds()))
    _echo_answer(output, {"workflow_id": workflow_id, "update_id": update_id, "result": result})


@workflow.command("stack")
@_which_run
@click.option("--timeout", type=DURATION, default="30s", show_default=True,
              help="How long to wait for a worker's answer.")
def workflow_stack(workflow_id: str, run_id: str | None, timeout: timedelta) -> None:
    """Show where each of the workflow's coroutines waits (the __stack_trace query)."""
    with connected_client() as client:
        click.echo(_guarded(lambda: client.get_workflow_handle(workflow_id, run_id=run_id).query(
            "__stack_trace", rpc_timeout=timeout.total_seconds())))
