"""`streamproc`: dev mode, the local broker, the engine, jobs, events and workers."""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
import time

import click

from streamproc.cli.connect import ENV_CONNECT_TIMEOUT, require_broker
from streamproc.cli.errors import StreamprocGroup
from streamproc.cli.metrics_option import METRICS_PORT, metrics_served
from streamproc.cli.params import POSITIVE_DURATION
from streamproc.kafka.user_config import KafkaConfigError, user_properties
from streamproc.logs import configure_logging
from streamproc.settings import Settings


@click.group(cls=StreamprocGroup)
@click.version_option(package_name="streamproc", prog_name="streamproc")
@click.option("--log-format", type=click.Choice(["console", "json"]), default=None,
              help="Log format (default: console on a terminal, json otherwise).")
@click.option("--bootstrap", default=None, metavar="HOST:PORT[,...]",
              help="Kafka bootstrap servers (sets STREAMPROC_BOOTSTRAP).")
@click.option("--namespace", default=None, help="Prefix of every topic and group (sets STREAMPROC_NAMESPACE).")
@click.option("--connect-timeout", type=POSITIVE_DURATION, default=None,
              help=f"How long a command waits for the broker to answer before it gives up (default 10s; "
                   f"sets {ENV_CONNECT_TIMEOUT}).")
def main(log_format: str | None, bootstrap: str | None, namespace: str | None, connect_timeout) -> None:
    """streamproc: a durable workflow and job engine on Kafka.

    Secured clusters: any librdkafka property as STREAMPROC_KAFKA_<PROPERTY> (e.g.
    STREAMPROC_KAFKA_SECURITY_PROTOCOL=SASL_SSL) or in a properties file named by
    STREAMPROC_KAFKA_CONFIG.
    """
    # Through the environment: every command, and the processes it starts, read Settings.from_env.
    if connect_timeout is not None:
        os.environ[ENV_CONNECT_TIMEOUT] = f"{connect_timeout.total_seconds():g}"
    for variable, value in (("STREAMPROC_BOOTSTRAP", bootstrap), ("STREAMPROC_NAMESPACE", namespace)):
        if value is not None:
            os.environ[variable] = value
    try:  # a setting that would break a guarantee: one line before anything starts
        user_properties()
    except KafkaConfigError as exc:
        raise click.ClickException(str(exc)) from None
    configure_logging(log_format)
    # `kill -USR1 <pid>` writes every thread's stack to stderr: what a process that stopped
    # making progress is waiting on, without a debugger on the host.
    # The process's own stderr (sys.__stderr__), not whatever a caller swapped in.
    if sys.__stderr__ is not None:
        faulthandler.register(signal.SIGUSR1, file=sys.__stderr__, all_threads=True)


def _run_until_signal(engine) -> None:
    """Run the engine in this thread; SIGINT/SIGTERM stop it cleanly; SIGUSR2 logs its
    counters (`engine_stats`: transactions committed, commands processed)."""
    def handle(signum, frame):
        engine.stop()

    def report(signum, frame):
        # From a thread of its own: the signal may come while this thread is inside a log write.
        threading.Thread(target=engine.log_stats, name="engine-stats", daemon=True).start()
    signal.signal(signal.SIGINT, handle)
    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGUSR2, report)
    engine.run()


@main.command()
@click.option("--partitions", type=click.IntRange(1, 8192), default=None,
              help="Partitions of new topics (default STREAMPROC_PARTITIONS or 4).")
@click.option("--example/--no-example", default=True, show_default=True,
              help="Also run an example worker and create a few jobs, printing their events.")
@METRICS_PORT
def dev(partitions: int | None, example: bool, metrics_port: int) -> None:
    """Run everything locally: a broker (unless STREAMPROC_BOOTSTRAP names one), topics, an engine."""
    from streamproc.cli.dev_summary import dev_summary
    from streamproc.devenv.broker_choice import ensure_broker
    from streamproc.devenv.example import start_example
    from streamproc.engine.processing import Limits
    from streamproc.kafka.engine import Engine
    from streamproc.metrics import EngineMetrics, WorkerMetrics

    started = time.monotonic()
    bootstrap, broker = ensure_broker()
    settings = Settings.from_env(bootstrap=bootstrap, partitions=partitions)
    engine_metrics = EngineMetrics() if metrics_port else None  # the workers' share its registry
    engine = Engine(settings, limits=Limits.from_settings(settings), metrics=engine_metrics)
    worker_metrics = WorkerMetrics(engine_metrics.registry) if engine_metrics else None
    stop_example = start_example(settings, engine, worker_metrics) if example else None

    def say_ready() -> None:
        engine.ready.wait()
        click.echo(dev_summary(settings, broker_dir=broker and str(broker.state_dir), example=example,
                               metrics_port=metrics_port, ready_after_s=time.monotonic() - started), err=True)
    threading.Thread(target=say_ready, name="dev-ready", daemon=True).start()
    try:
        with metrics_served(metrics_port, engine_metrics and engine_metrics.registry,
                            live=engine.alive, ready=engine.restored):
            _run_until_signal(engine)
    finally:
        if stop_example is not None:
            stop_example()
        if broker is not None:
            click.echo("stopping the local broker", err=True)
            broker.stop()


@main.group()
def engine() -> None:
    """The engine process."""


@engine.command("run")
@click.option("--engine-id", default=None, help="Stable id of this process (STREAMPROC_ENGINE_ID).")
@click.option("--max-batch", type=click.IntRange(1, 100_000), default=2000, show_default=True)
@click.option("--commit-interval-ms", type=click.FloatRange(0, 1000), default=0, show_default=True,
              help="Transactions begin at most this often; a batch ready sooner takes in the commands "
                   "arriving meanwhile (fewer transactions under a steady light flow, 0: off).")
@METRICS_PORT
def engine_run(engine_id: str | None, max_batch: int, commit_interval_ms: float, metrics_port: int) -> None:
    """Own the partitions the engine group gives this process, until SIGINT/SIGTERM."""
    from streamproc.engine.processing import Limits
    from streamproc.kafka.engine import Engine
    from streamproc.kafka.errors import IdentityConflict, StartRefused
    from streamproc.metrics import EngineMetrics

    settings = Settings.from_env(engine_id=engine_id)
    _say_if_no_broker_yet()
    metrics = EngineMetrics() if metrics_port else None
    try:
        engine = Engine(settings, limits=Limits.from_settings(settings), max_batch=max_batch, metrics=metrics,
                        commit_interval_ms=commit_interval_ms)
        with metrics_served(metrics_port, metrics and metrics.registry, live=engine.alive, ready=engine.restored):
            _run_until_signal(engine)
    except (IdentityConflict, StartRefused) as exc:  # another live engine has this id, ...: one line, exit 1
        raise click.ClickException(str(exc)) from None


def _say_if_no_broker_yet() -> None:
    """An engine waits for its broker as long as it takes (a broker restart is ordinary), but
    one started against an address where nothing answers says so once, in words, before
    its fault log takes over."""
    from streamproc.kafka.connection import BrokerUnreachable

    try:
        require_broker()
    except BrokerUnreachable as exc:
        import structlog
        structlog.get_logger("streamproc.engine").warning("broker_unreachable_waiting", reason=str(exc),
                                                          action="the engine keeps trying; Ctrl-C stops it")


@main.group()
def topics() -> None:
    """Topic administration."""


@topics.command("create")
@click.option("--partitions", type=click.IntRange(1, 8192), default=None)
def topics_create(partitions: int | None) -> None:
    """Create the commands, events and changelog topics if they do not exist."""
    from streamproc.kafka.admin import TopicAdmin
    from streamproc.protocol.topics import Topics

    from streamproc.kafka.errors import StartRefused

    require_broker()
    s = Settings.from_env(partitions=partitions)
    try:
        n = TopicAdmin(s.bootstrap, Topics(s.namespace)).ensure_engine_topics(s.partitions)
    except StartRefused as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"{s.namespace}: commands, events, changelog with {n} partitions")


from streamproc.cli.broker_commands import broker  # noqa: E402
from streamproc.cli.job_commands import incident, job  # noqa: E402
from streamproc.cli.worker_commands import events, worker  # noqa: E402
from streamproc.cli.workflow_commands import workflow  # noqa: E402
from streamproc.cli.schedule_commands import schedule  # noqa: E402
from streamproc.cli import workflow_messages  # noqa: E402,F401  (adds signal, query, stack to `workflow`)

main.add_command(broker)
main.add_command(job)
main.add_command(incident)
main.add_command(workflow)
main.add_command(schedule)
main.add_command(events)
main.add_command(worker)

__all__ = ["main"]
