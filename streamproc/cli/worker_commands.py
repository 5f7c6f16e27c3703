"""`streamproc worker run` (jobs), `streamproc worker start` (workflows and activities) and
`streamproc events tail`."""

from __future__ import annotations

import importlib
import os
import signal
import sys
import threading
import time
from datetime import timedelta

import click
import structlog

from streamproc.cli.connect import require_broker
from streamproc.cli.metrics_option import METRICS_PORT, metrics_served
from streamproc.cli.output import OUTPUT, echo_json
from streamproc.cli.params import DURATION


def _load_handler(spec: str, what: str = "function"):
    """The object `module:attr` names, the module found as `python -m` would find it: in
    the current directory first (a console script's import path lacks it)."""
    module_name, _, attr = spec.partition(":")
    if not attr:
        raise click.BadParameter(f"expected module:{what}, got {spec!r}")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise click.BadParameter(f"cannot load {spec!r}: {exc}") from None


def _load_definition(spec: str, what: str, definition_of):
    """The object `spec` names, if `definition_of` accepts it (a decorated class or function)."""
    loaded = _load_handler(spec, what)
    try:
        definition_of(loaded)
    except TypeError as exc:
        raise click.BadParameter(str(exc)) from None
    return loaded


@click.group()
def worker() -> None:
    """Job workers, and workers of workflows and activities."""


@worker.command("run")
@click.argument("task_queue")
@click.option("--handler", default="streamproc.devenv.example:echo_handler", show_default=True,
              help="module:function called with each job; its return value is the result.")
@click.option("--worker-id", default=None)
@click.option("--retry-backoff", type=DURATION, default="0s", show_default=True,
              help="How long before a failed job is retried (e.g. 30s, 5m).")
@click.option("--max-concurrent", type=click.IntRange(1), default=16, show_default=True,
              help="Handlers running at once.")
@click.option("--start-unconfirmed", is_flag=True,
              help="Run a handler as soon as its START is sent, without waiting for the engine to accept it: "
                   "faster, but a handler may run twice after a rebalance.")
@click.option("--push", is_flag=True,
              help="Register a job stream on every engine partition: the engine starts jobs for this worker "
                   "and pushes them (no task record, no START); jobs it cannot push still come from the topic.")
@METRICS_PORT
def worker_run(task_queue: str, handler: str, worker_id: str | None, retry_backoff: timedelta, max_concurrent: int,
               start_unconfirmed: bool, push: bool, metrics_port: int) -> None:
    """Join TASK_QUEUE's consumer group and run HANDLER for its jobs until SIGINT/SIGTERM."""
    from streamproc.metrics import WorkerMetrics
    from streamproc.worker.job_worker import JobWorker

    handle = _load_handler(handler)
    require_broker()
    metrics = WorkerMetrics() if metrics_port else None
    w = JobWorker(task_queue, handle, worker_id=worker_id,
                  retry_backoff=retry_backoff, max_concurrent=max_concurrent,
                  start_unconfirmed=start_unconfirmed, push=push, metrics=metrics)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: w.stop())
    with metrics_served(metrics_port, metrics and metrics.registry, ready=w.ready.is_set):
        w.run()
    _exit_past_stuck_handlers()


@worker.command("start")
@click.argument("task_queue")
@click.option("--workflow", "workflows", multiple=True, metavar="MODULE:CLASS",
              help="A @workflow.defn class to run (repeatable).")
@click.option("--activity", "activities", multiple=True, metavar="MODULE:FUNCTION",
              help="An @activity.defn function to run (repeatable).")
@click.option("--identity", default=None, help="Worker identity in histories (default pid@host).")
@click.option("--max-concurrent-activities", type=click.IntRange(1), default=100, show_default=True)
@click.option("--max-cached-workflows", type=click.IntRange(0), default=1000, show_default=True)
@click.option("--no-eager-activities", "no_eager", is_flag=True,
              help="Send every activity through the task queue, even those this worker could run at once.")
@click.option("--checkpoint-local-activities", "checkpoint_local", is_flag=True,
              help="Put each local activity's marker on the log before the next step runs (journaled "
                   "while the workflow task is out).")
@click.option("--no-task-hand-back", "no_hand_back", is_flag=True,
              help="Take every workflow task from the task queue: answers do not ask for the run's next "
                   "task back on the worker's replies partition.")
@click.option("--no-task-ride-along", "no_ride_along", is_flag=True,
              help="Never answer a run's next workflow task with an activity's completion: every "
                   "remote activity step is two transactions.")
@METRICS_PORT
def worker_start(task_queue: str, workflows: tuple[str, ...], activities: tuple[str, ...],
                 identity: str | None, max_concurrent_activities: int, max_cached_workflows: int,
                 no_eager: bool, checkpoint_local: bool, no_hand_back: bool, no_ride_along: bool,
                 metrics_port: int) -> None:
    """Run TASK_QUEUE's workflows and activities until SIGINT/SIGTERM (then leave the groups cleanly)."""
    from streamproc.activity.definition import ActivityDefinition
    from streamproc.client import Client
    from streamproc.metrics import WorkerMetrics
    from streamproc.worker import Worker
    from streamproc.workflow.definition import WorkflowDefinition

    if not workflows and not activities:
        raise click.UsageError("give at least one --workflow or --activity")
    workflow_classes = [_load_definition(spec, "Class", WorkflowDefinition.of) for spec in workflows]
    activity_functions = [_load_definition(spec, "function", ActivityDefinition.of) for spec in activities]
    s = require_broker()
    metrics = WorkerMetrics() if metrics_port else None
    with Client(s.bootstrap, s.namespace) as client:
        try:
            w = Worker(client, task_queue=task_queue, workflows=workflow_classes, activities=activity_functions,
                       identity=identity, max_concurrent_activities=max_concurrent_activities,
                       max_cached_workflows=max_cached_workflows, disable_eager_activity_execution=no_eager,
                       checkpoint_local_activities=checkpoint_local, disable_workflow_task_hand_back=no_hand_back,
                       disable_workflow_task_ride_along=no_ride_along, metrics=metrics)
        except ValueError as exc:  # two workflows or activities of the same name
            raise click.UsageError(str(exc)) from None
        with metrics_served(metrics_port, metrics and metrics.registry, ready=w.is_ready):
            w.run()  # in the main thread: SIGINT / SIGTERM stop it
    _exit_past_stuck_handlers()


def _exit_past_stuck_handlers(grace_s: float = 1.0) -> None:
    """Exit even if a handler never returns: Python would wait for its thread forever. The
    worker has left its groups and sent what it had; the engine times the attempt out."""
    from concurrent.futures import thread as futures_thread

    # Pool threads are joined at exit even when daemonic (concurrent.futures' own registry).
    pools = set(getattr(futures_thread, "_threads_queues", {}))
    deadline = time.monotonic() + grace_s
    stuck = []
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and (not thread.daemon or thread in pools):
            thread.join(max(deadline - time.monotonic(), 0))
            if thread.is_alive():
                stuck.append(thread.name)
    if stuck:
        structlog.get_logger("streamproc.worker").warning("worker_exiting_past_stuck_handlers", threads=stuck)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


@click.group()
def events() -> None:
    """The events topic."""


@events.command("tail")
@click.option("--from-beginning", is_flag=True, help="Also print the events the topic already holds.")
@OUTPUT
def events_tail(from_beginning: bool, output: str) -> None:
    """Print events and rejections as they are committed (read_committed), until Ctrl-C."""
    from streamproc.client.events import EventReader
    from streamproc.devenv.example import describe

    s = require_broker()
    stop = []
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    with EventReader(s.bootstrap, s.namespace, from_beginning=from_beginning) as reader:
        # On stderr: what this waits for, so a quiet topic is not taken for a hung command.
        click.echo(f"waiting for events on {s.namespace}.events at {s.bootstrap} "
                   f"({'from the beginning' if from_beginning else 'new ones only'}; Ctrl-C stops)", err=True)
        while not stop:
            for record, partition, offset in reader.poll():
                if output == "table":
                    click.echo(describe(record))
                else:
                    echo_json({f: getattr(record, f) for f in record.__slots__}, "jsonl")
