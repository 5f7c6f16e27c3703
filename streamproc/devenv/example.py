"""The example dev mode runs: a worker for `hello` jobs and a few jobs, a worker for the
`orders` workflow and two orders, their events and results printed. The orders use the
asyncio client and worker, as a Temporal program does."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import click

from streamproc.client.client import Client
from streamproc.client.events import EventReader
from streamproc.protocol.records import Record, RecordType
from streamproc.settings import Settings
from streamproc.devenv.example_workflow import EXAMPLE_WORKFLOW_QUEUE, OrderWorkflow, charge, reserve
from streamproc.worker import Worker
from streamproc.worker.job_worker import ActivatedJob, JobWorker

EXAMPLE_QUEUE = "hello"


def echo_handler(job: ActivatedJob) -> dict:
    """Answers every job with a greeting built from its payload."""
    name = job.payload.get("name", "world") if isinstance(job.payload, dict) else job.payload
    return {"greeting": f"hello, {name}", "attempt": job.attempt}


def describe(record: Record) -> str:
    head = f"p{record.partition_id} {record.value_type} {record.intent} key={record.key}"
    if record.record_type is RecordType.COMMAND_REJECTION:
        return f"{head} REJECTED {record.rejection_type}: {record.rejection_reason}"
    v = record.value or {}
    detail = {k: v[k] for k in ("workflow_id", "event_id", "activity_id", "type", "attempt", "retries",
                                "worker", "result", "error_message")
              if v.get(k) not in (None, "", -1, 0)}
    return f"{head} {detail}"


def start_example(settings: Settings, engine, metrics=None) -> Callable[[], None]:
    """Start the example worker and event printer once the engine is ready; returns a stopper.
    `metrics`: the `WorkerMetrics` the example workers report to (None: none)."""
    stop = threading.Event()
    workers: list[Worker] = []
    worker = JobWorker(EXAMPLE_QUEUE, echo_handler, bootstrap=settings.bootstrap,
                       namespace=settings.namespace, worker_id="example-worker", metrics=metrics)

    def printer() -> None:
        with EventReader(settings.bootstrap, settings.namespace, from_beginning=False) as reader:
            reader.poll(1.0)  # find its partitions' ends before the jobs are created
            with Client(settings.bootstrap, settings.namespace) as client:
                for name in ("ada", "grace", "edsger"):
                    client.create_job(EXAMPLE_QUEUE, {"name": name})
            click.echo("example: created 3 jobs on task queue 'hello'", err=True)
            threading.Thread(target=run_orders, name="example-orders", daemon=True).start()
            while not stop.is_set():
                for record, _, _ in reader.poll():
                    click.echo(describe(record))

    async def orders() -> None:
        client = await Client.connect(settings.bootstrap, namespace=settings.namespace)
        with ThreadPoolExecutor(max_workers=8, thread_name_prefix="example-activity") as executor:
            workflows = Worker(client, task_queue=EXAMPLE_WORKFLOW_QUEUE, workflows=[OrderWorkflow],
                               activities=[reserve, charge], activity_executor=executor,
                               identity="example-worker", metrics=metrics)
            workers.append(workflows)
            running = asyncio.create_task(workflows.run())  # until the stopper stops it
            handles = [await client.start_workflow(OrderWorkflow.run, f"order-{n}",
                                                   id=f"example-order-{n}-{time.time_ns()}",
                                                   task_queue=EXAMPLE_WORKFLOW_QUEUE) for n in (1, 2)]
            click.echo(f"example: started {len(handles)} OrderWorkflow runs on task queue "
                       f"'{EXAMPLE_WORKFLOW_QUEUE}'", err=True)
            for handle in handles:
                click.echo(f"example: workflow {handle.id} completed: {await handle.result(timeout=120)}", err=True)
            await running
        await client.aclose()

    def run_orders() -> None:
        asyncio.run(orders())

    def run() -> None:
        engine.ready.wait()
        threading.Thread(target=worker.run, name="example-worker", daemon=True).start()
        printer()

    threading.Thread(target=run, name="example", daemon=True).start()

    def stopper() -> None:
        stop.set()
        worker.stop()
        for started in workers:
            started.stop()
        time.sleep(0.3)

    return stopper
