"""`streamproc broker start|stop|status|kill|reset|install|log`: the local Kafka broker (or a
local KRaft cluster), from Maven Central jars, no Docker. `python -m streamproc.devenv.broker`
is the same group.

``start`` prints the bootstrap address on stdout and nothing else, so that
``export STREAMPROC_BOOTSTRAP=$(streamproc broker start)`` works; progress goes to the log
on stderr. ``status`` exits 0 if the broker runs, 3 if not (LSB's "program is not running").
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import click

from streamproc.cli.output import OUTPUT, echo_json
from streamproc.cli.params import POSITIVE_DURATION
from streamproc.devenv.broker_settings import (DEFAULT_HEAP, DEFAULT_KAFKA_VERSION, DEFAULT_PORT, ENV_CONTROLLER_PORT,
                                               ENV_DIR, ENV_HEAP, ENV_PORT, ENV_VERSION)

EXIT_NOT_RUNNING = 3


def _broker_options(command):
    for option in reversed([
        click.option("--nodes", type=click.IntRange(1, 9), default=1, show_default=True,
                     help="1: a single broker; 3: a three-node KRaft cluster (replication 3, min.insync.replicas 2)."),
        click.option("--port", "-p", type=click.IntRange(1, 65535), default=None,
                     help=f"Client port (${ENV_PORT}, default {DEFAULT_PORT}); a cluster's first node's."),
        click.option("--controller-port", type=click.IntRange(1, 65535), default=None,
                     help=f"Controller port (${ENV_CONTROLLER_PORT}, default port+1)."),
        click.option("--dir", "-d", "state_dir", default=None, help=f"State directory (${ENV_DIR})."),
        click.option("--kafka-version", default=None, help=f"Kafka version (${ENV_VERSION}, default {DEFAULT_KAFKA_VERSION})."),
        click.option("--lib-dir", default=None, help="Jar cache directory."),
        click.option("--heap", default=None, help=f"JVM heap options (${ENV_HEAP}, default {DEFAULT_HEAP!r})."),
    ]):
        command = option(command)
    return command


def _local(nodes: int = 1, port: int | None = None, controller_port: int | None = None, state_dir: str | None = None,
           kafka_version: str | None = None, lib_dir: str | None = None, heap: str | None = None, **broker_kwargs):
    """The single broker, or with `nodes` > 1 a cluster on ports from `port` up (two per
    node), its state beside the single broker's."""
    from streamproc.devenv.broker import LocalBroker
    if nodes <= 1:
        return LocalBroker(port=port, controller_port=controller_port, state_dir=state_dir, kafka_version=kafka_version,
                           lib_dir=lib_dir, heap=heap, **broker_kwargs)
    from streamproc.devenv.broker_settings import default_state_dir, port_from_env
    from streamproc.devenv.kraft_cluster import LocalCluster
    return LocalCluster(nodes, port or port_from_env(ENV_PORT) or DEFAULT_PORT,
                        state_dir or default_state_dir().with_name("kafka-cluster"))


@click.group()
def broker() -> None:
    """The local Kafka broker, or a local cluster (KRaft, from Maven Central jars, no Docker)."""


@broker.command("start")
@_broker_options
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE", help="An extra server property (repeatable).")
@click.option("--sasl-ssl-port", type=click.IntRange(1, 65535), default=None,
              help="Also listen with SASL_SSL (TLS + SCRAM-SHA-512) on this port; needs the three below.")
@click.option("--tls-cert", type=click.Path(exists=True, dir_okay=False), default=None,
              help="SASL_SSL: the server's certificate chain for 127.0.0.1 (PEM).")
@click.option("--tls-key", type=click.Path(exists=True, dir_okay=False), default=None,
              help="SASL_SSL: its key, unencrypted PKCS#8 (PEM).")
@click.option("--scram-user", metavar="NAME:PASSWORD", default=None,
              help="SASL_SSL: the SCRAM-SHA-512 user, created when the storage is first formatted.")
@click.option("--timeout", type=POSITIVE_DURATION, default="90s", show_default=True, help="How long to wait for it.")
def broker_start(settings: tuple[str, ...], sasl_ssl_port: int | None, tls_cert: str | None, tls_key: str | None,
                 scram_user: str | None, timeout: timedelta, **where) -> None:
    """Start the local broker (or cluster); prints its bootstrap servers."""
    extra = {}
    for item in settings:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"wants KEY=VALUE, got {item!r}", param_hint="--set")
        extra[key.strip()] = value.strip()
    kwargs = {"extra_properties": extra, "sasl_ssl": _sasl_ssl(sasl_ssl_port, tls_cert, tls_key, scram_user)} \
        if where["nodes"] <= 1 else {}
    local = _local(**where, **kwargs)
    click.echo(local.start(timeout=timeout.total_seconds()))
    if where["nodes"] <= 1 and not local.launched:
        click.echo(f"already running (pid {local.status()['pid']})", err=True)


def _sasl_ssl(port: int | None, cert: str | None, key: str | None, user: str | None):
    if port is None:
        return None
    if not (cert and key and user and ":" in user):
        raise click.UsageError("--sasl-ssl-port needs --tls-cert, --tls-key and --scram-user NAME:PASSWORD")
    from streamproc.devenv.broker_security import SaslSslListener

    name, _, password = user.partition(":")
    return SaslSslListener(port, Path(cert).read_text(), Path(key).read_text(), name, password)


@broker.command("stop")
@_broker_options
@click.option("--timeout", type=POSITIVE_DURATION, default="30s", show_default=True, help="How long to wait for it.")
def broker_stop(timeout: timedelta, **where) -> None:
    """Stop the broker (controlled shutdown, data kept)."""
    if _local(**where).stop(timeout=timeout.total_seconds()) is False:
        click.echo("not running", err=True)


@broker.command("kill")
@_broker_options
def broker_kill(**where) -> None:
    """SIGKILL the broker, keeping its data (crash tests)."""
    if where["nodes"] > 1:
        _local(**where).kill()
    elif not _local(**where).kill():
        click.echo("not running", err=True)


@broker.command("reset")
@_broker_options
def broker_reset(**where) -> None:
    """Stop the broker and delete its data."""
    _local(**where).reset()


@broker.command("install")
@_broker_options
def broker_install(**where) -> None:
    """Fetch Kafka's jars (once); prints where they are."""
    click.echo(_local(**where).install())


@broker.command("log")
@_broker_options
@click.option("--lines", "-n", type=click.IntRange(1), default=100, show_default=True)
def broker_log(lines: int, **where) -> None:
    """The last lines of the broker's own log."""
    click.echo(_local(**where).log_tail(lines))


@broker.command("status")
@_broker_options
@OUTPUT
@click.option("--json", "as_json", is_flag=True, hidden=True, help="Same as --output json.")
def broker_status(output: str, as_json: bool, **where) -> None:
    """Whether the broker runs (exit 0) or not (exit 3), its pid, address, memory and state dir."""
    status = _local(**where).status()
    nodes = list(status.values()) if where["nodes"] > 1 else [status]
    if as_json or output != "table":
        echo_json(status, "jsonl" if as_json else output)
    else:
        for st in nodes:
            if st.get("running"):
                click.echo(f"running  pid {st['pid']}  {st['bootstrap']}  rss {_human_bytes(st.get('rss'))}  "
                           f"kafka {st.get('kafka_version')}  {st.get('state_dir')}")
            else:
                click.echo(f"not running  ({st.get('bootstrap')}, {st.get('state_dir')})")
    if not all(st.get("running") for st in nodes):
        raise SystemExit(EXIT_NOT_RUNNING)


def _human_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"
