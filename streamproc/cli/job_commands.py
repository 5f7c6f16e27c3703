"""`streamproc job ...`: send job commands from the shell, and read jobs and incidents back.

Commands the engine answers wait for its answer and print it (a rejection: its reason on
stderr, exit 1); `--no-wait` only puts the command on the log.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import click
import orjson

from streamproc.cli.connect import connected_client
from streamproc.cli.output import OUTPUT, echo_json, echo_table
from streamproc.cli.params import DURATION, POSITIVE_DURATION, json_value
from streamproc.client.client import Client
from streamproc.client.errors import CommandRejectedError, CommandsNotDeliveredError, RequestNotSentError
from streamproc.client.job_requests import JobRequests
from streamproc.protocol.records import JobIntent, Record

_NO_WAIT = click.option("--no-wait", is_flag=True, help="Only put the command on the log; do not wait for the answer.")


@contextlib.contextmanager
def _client() -> Iterator[Client]:
    """A client whose commands are on the log when it closes, or one line saying which
    are not (their outcome unknown, or certainly not sent)."""
    try:
        with connected_client() as client:
            yield client
    except (CommandsNotDeliveredError, RequestNotSentError) as exc:
        raise click.ClickException(str(exc)) from None


def _answered(call) -> Record:
    """The engine's answer; its refusal is one line and exit 1."""
    try:
        return call()
    except (CommandRejectedError, ValueError) as exc:
        raise click.ClickException(f"rejected: {exc}") from None


def _send(intent: str, key: int, no_wait: bool, output: str, send_only, **value: Any) -> None:
    """Send `intent` for job `key` and print the event it wrote, or with `no_wait` only send it."""
    with _client() as client:
        if no_wait:
            send_only(client)
            click.echo(f"{intent} sent for job {key}", err=True)
            return
        with JobRequests(client) as jobs:
            event = _answered(lambda: jobs.command(intent, key, **value))
    _echo_event(event, output)


def _echo_event(event: Record, output: str) -> None:
    if output != "table":
        echo_json({"key": event.key, "intent": event.intent, "partition": event.partition_id, **(event.value or {})},
                  output)
    else:
        click.echo(f"job {event.key} {event.intent}")


@click.group()
def job() -> None:
    """Create, answer and inspect jobs (`job list`, `job describe`; incidents: `incident list`)."""


@job.command("create")
@click.argument("task_queue")
@click.option("--payload", default="{}", help="JSON input of the job.")
@click.option("--retries", type=click.IntRange(0), default=3, show_default=True)
@click.option("--timeout", type=POSITIVE_DURATION, default="5m", show_default=True,
              help="How long a started job may run before it times out (30s, 5m, 1h30m; a number is seconds).")
@click.option("--count", type=click.IntRange(1), default=1, show_default=True)
@_NO_WAIT
@OUTPUT
def job_create(task_queue: str, payload: str, retries: int, timeout: timedelta, count: int, no_wait: bool,
               output: str) -> None:
    """Create jobs on TASK_QUEUE; prints each job's key (with --no-wait: the request ids
    their CREATED events will carry)."""
    data = json_value(payload)
    with _client() as client:
        if no_wait:
            for _ in range(count):
                click.echo(client.create_job(task_queue, data, retries=retries, timeout=timeout))
            return
        with JobRequests(client) as jobs:
            for _ in range(count):
                event = _answered(lambda: jobs.create(task_queue, data, retries=retries, timeout=timeout))
                if output == "table":
                    click.echo(event.key)
                else:
                    _echo_event(event, output)


@job.command("complete")
@click.argument("key", type=int)
@click.argument("attempt", type=int)
@click.option("--result", default="null", help="JSON result.")
@_NO_WAIT
@OUTPUT
def job_complete(key: int, attempt: int, result: str, no_wait: bool, output: str) -> None:
    """Complete attempt ATTEMPT of job KEY."""
    value = json_value(result)
    _send(JobIntent.COMPLETE, key, no_wait, output, lambda c: c.complete_job(key, attempt, value),
          attempt=attempt, result=orjson.dumps(value).decode())


@job.command("fail")
@click.argument("key", type=int)
@click.argument("attempt", type=int)
@click.option("--retries", type=int, required=True, help="Retries left after this failure.")
@click.option("--message", default="", help="Error message.")
@click.option("--backoff", type=DURATION, default="0s", help="How long before a retry (30s, 5m).")
@_NO_WAIT
@OUTPUT
def job_fail(key: int, attempt: int, retries: int, message: str, backoff: timedelta, no_wait: bool,
             output: str) -> None:
    """Fail attempt ATTEMPT of job KEY (retries 0: an incident)."""
    _send(JobIntent.FAIL, key, no_wait, output, lambda c: c.fail_job(key, attempt, retries, message, backoff),
          attempt=attempt, retries=retries, error_message=message,
          retry_backoff_ms=int(backoff.total_seconds() * 1000))


@job.command("update-retries")
@click.argument("key", type=int)
@click.argument("retries", type=click.IntRange(1))
@_NO_WAIT
@OUTPUT
def job_update_retries(key: int, retries: int, no_wait: bool, output: str) -> None:
    """Give a job retries again (resolves its incident if it has one)."""
    _send(JobIntent.UPDATE_RETRIES, key, no_wait, output, lambda c: c.update_job_retries(key, retries),
          retries=retries)


@job.command("cancel")
@click.argument("key", type=int)
@_NO_WAIT
@OUTPUT
def job_cancel(key: int, no_wait: bool, output: str) -> None:
    """Cancel job KEY."""
    _send(JobIntent.CANCEL, key, no_wait, output, lambda c: c.cancel_job(key))


_JOB_STATES = ["ACTIVATABLE", "STARTED", "FAILED", "COMPLETED", "CANCELED"]


def _read(partitions=None) -> list[Record]:
    """The events topic's records now (of `partitions`, else of every partition)."""
    from streamproc.client.job_listing import read_events

    with _client() as client:
        return read_events(client.bootstrap, client.topics.events,
                           range(client.partitions) if partitions is None else partitions,
                           group_prefix=client.topics.namespace)


def _time(ms: int) -> str:
    from streamproc.cli.human_time import timestamp
    return timestamp(ms)


@job.command("list")
@click.option("--state", type=click.Choice(_JOB_STATES), default=None, help="Only jobs in this state.")
@click.option("--type", "task_queue", default=None, help="Only jobs of this task queue.")
@OUTPUT
def job_list(state: str | None, task_queue: str | None, output: str) -> None:
    """Jobs the events topic still holds, newest first, with their current state."""
    from streamproc.client.job_listing import summarize_jobs

    jobs = [j for j in summarize_jobs(_read()) if (state is None or j.state == state)
            and (task_queue is None or j.type == task_queue)]
    if output != "table":
        echo_json([j.as_dict() for j in jobs], output)
        return
    echo_table([(j.key, j.type, j.state, j.attempt, j.retries, j.worker, _time(j.created_ms), _time(j.updated_ms))
                for j in jobs], ("KEY", "TYPE", "STATE", "ATTEMPT", "RETRIES", "WORKER", "CREATED", "UPDATED"))


@job.command("describe")
@click.argument("key", type=int)
@OUTPUT
def job_describe(key: int, output: str) -> None:
    """Job KEY: its state, last attempt, payload and result, and every event it has."""
    from streamproc.client.job_listing import summarize_jobs
    from streamproc.protocol.partitioning import partition_of_key

    events = [r for r in _read([partition_of_key(key)]) if r.key == key and r.value_type == "JOB"]
    summaries = summarize_jobs(events)
    if not summaries:
        raise click.ClickException(f"no job {key} on the events topic (a wrong key, or past its retention)")
    job_summary = summaries[0]
    history = [{"intent": r.intent, "time_ms": r.timestamp_ms, "attempt": (r.value or {}).get("attempt"),
                "worker": (r.value or {}).get("worker")} for r in events]
    if output != "table":
        echo_json({**job_summary.as_dict(), "events": history}, output)
        return
    echo_table([("Key", key), ("Type", job_summary.type), ("State", job_summary.state),
                ("Attempt", job_summary.attempt), ("RetriesLeft", job_summary.retries),
                ("Worker", job_summary.worker), ("Payload", job_summary.payload),
                ("Result", job_summary.result or ""), ("LastError", job_summary.error_message),
                ("Created", _time(job_summary.created_ms)), ("Updated", _time(job_summary.updated_ms))],
               ("Field", "Value"))
    click.echo("")
    echo_table([(_time(h["time_ms"]), h["intent"], h["attempt"], h["worker"]) for h in history],
               ("TIME", "EVENT", "ATTEMPT", "WORKER"))


@click.group()
def incident() -> None:
    """Incidents: jobs out of retries (`job update-retries KEY N` resolves one)."""


@incident.command("list")
@click.option("--all", "show_all", is_flag=True, help="Resolved incidents too.")
@OUTPUT
def incident_list(show_all: bool, output: str) -> None:
    """Open incidents (with --all: resolved ones too), newest first."""
    from streamproc.client.job_listing import summarize_incidents

    incidents = [i for i in summarize_incidents(_read()) if show_all or i.open]
    if output != "table":
        echo_json([i.as_dict() for i in incidents], output)
        return
    echo_table([(i.key, i.job_key, i.job_type, i.error_type, i.error_message, _time(i.created_ms),
                 _time(i.resolved_ms) if i.resolved_ms else "open") for i in incidents],
               ("KEY", "JOB KEY", "JOB TYPE", "ERROR TYPE", "MESSAGE", "CREATED", "RESOLVED"))
