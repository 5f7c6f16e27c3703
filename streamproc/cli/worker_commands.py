"""`streamproc worker run` and `streamproc events tail`."""

from __future__ import annotations

import importlib
import signal
from datetime import timedelta

import click
import orjson

from streamproc.settings import Settings


def _load_handler(spec: str):
    module_name, _, attr = spec.partition(":")
    if not attr:
        raise click.BadParameter(f"expected module:function, got {spec!r}")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise click.BadParameter(f"cannot load {spec!r}: {exc}") from None


@click.group()
def worker() -> None:
    """Job workers."""


@worker.command("run")
@click.argument("task_queue")
@click.option("--handler", default="streamproc.devenv.example:echo_handler", show_default=True,
              help="module:function called with each job; its return value is the result.")
@click.option("--worker-id", default=None)
@click.option("--retry-backoff", "backoff_s", type=click.FloatRange(0), default=0.0, show_default=True,
              help="Seconds before a failed job is retried.")
def worker_run(task_queue: str, handler: str, worker_id: str | None, backoff_s: float) -> None:
    """Join TASK_QUEUE's consumer group and run HANDLER for its jobs until SIGINT/SIGTERM."""
    from streamproc.worker.job_worker import JobWorker

    w = JobWorker(task_queue, _load_handler(handler), worker_id=worker_id,
                  retry_backoff=timedelta(seconds=backoff_s))
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: w.stop())
    w.run()


@click.group()
def events() -> None:
    """The events topic."""


@events.command("tail")
@click.option("--from-beginning", is_flag=True)
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def events_tail(from_beginning: bool, output: str) -> None:
    """Print events and rejections as they are committed (read_committed)."""
    from streamproc.client.events import EventReader
    from streamproc.devenv.example import describe

    s = Settings.from_env()
    stop = []
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    with EventReader(s.bootstrap, s.namespace, from_beginning=from_beginning) as reader:
        while not stop:
            for record, partition, offset in reader.poll():
                if output == "json":
                    d = {f: getattr(record, f) for f in record.__slots__}
                    click.echo(orjson.dumps(d, default=str).decode())
                else:
                    click.echo(describe(record))
