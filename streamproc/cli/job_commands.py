"""`streamproc job ...`: send job commands from the shell."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import timedelta

import click

from streamproc.cli.params import json_value
from streamproc.client.client import Client
from streamproc.client.errors import CommandsNotDeliveredError, RequestNotSentError


@contextlib.contextmanager
def _client() -> Iterator[Client]:
    """A client whose commands are on the log when it closes, or one line saying which
    are not (their outcome unknown, or certainly not sent)."""
    try:
        with Client() as client:
            yield client
    except (CommandsNotDeliveredError, RequestNotSentError) as exc:
        raise click.ClickException(str(exc)) from None


@click.group()
def job() -> None:
    """Create and answer jobs."""


@job.command("create")
@click.argument("task_queue")
@click.option("--payload", default="{}", help="JSON input of the job.")
@click.option("--retries", type=click.IntRange(0), default=3, show_default=True)
@click.option("--timeout", "timeout_s", type=click.FloatRange(0.001), default=300.0, show_default=True,
              help="Seconds a started job may run before it times out.")
@click.option("--count", type=click.IntRange(1), default=1, show_default=True)
def job_create(task_queue: str, payload: str, retries: int, timeout_s: float, count: int) -> None:
    """Create jobs on TASK_QUEUE; prints the request ids their CREATED events carry."""
    data = json_value(payload)
    with _client() as client:
        for _ in range(count):
            click.echo(client.create_job(task_queue, data, retries=retries,
                                         timeout=timedelta(seconds=timeout_s)))


@job.command("complete")
@click.argument("key", type=int)
@click.argument("attempt", type=int)
@click.option("--result", default="null", help="JSON result.")
def job_complete(key: int, attempt: int, result: str) -> None:
    with _client() as client:
        client.complete_job(key, attempt, json_value(result))


@job.command("fail")
@click.argument("key", type=int)
@click.argument("attempt", type=int)
@click.option("--retries", type=int, required=True, help="Retries left after this failure.")
@click.option("--message", default="", help="Error message.")
@click.option("--backoff", "backoff_s", type=click.FloatRange(0), default=0.0, help="Seconds before a retry.")
def job_fail(key: int, attempt: int, retries: int, message: str, backoff_s: float) -> None:
    with _client() as client:
        client.fail_job(key, attempt, retries, message, timedelta(seconds=backoff_s))


@job.command("update-retries")
@click.argument("key", type=int)
@click.argument("retries", type=click.IntRange(1))
def job_update_retries(key: int, retries: int) -> None:
    """Give a job retries again (resolves its incident if it has one)."""
    with _client() as client:
        client.update_job_retries(key, retries)


@job.command("cancel")
@click.argument("key", type=int)
def job_cancel(key: int) -> None:
    with _client() as client:
        client.cancel_job(key)
