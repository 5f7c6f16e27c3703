"""`--metrics-port` of the commands that run an engine or workers, and its server."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import click

METRICS_PORT = click.option(
    "--metrics-port", type=click.IntRange(0, 65535), default=0, show_default=True,
    help="Serve Prometheus metrics on /metrics, and /healthz and /readyz, on this port (0: off).")


@contextlib.contextmanager
def metrics_served(port: int, registry, **checks) -> Iterator[None]:
    """Serve `registry` (with the `live`/`ready` checks of `MetricsServer`) on `port` while
    the block runs, nothing for port 0; a port that cannot be listened on is one line, exit 1."""
    if not port:
        yield
        return
    from streamproc.metrics import MetricsPortError, MetricsServer

    try:
        server = MetricsServer(registry, port, **checks)
    except MetricsPortError as exc:
        raise click.ClickException(exc.strerror) from None
    with server:
        click.echo(f"metrics: http://localhost:{server.port}/metrics (and /healthz, /readyz)", err=True)
        yield
