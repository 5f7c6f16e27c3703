"""`/metrics`, `/healthz` and `/readyz` on one port, served from a daemon thread.

A small `http.server` rather than prometheus-client's `start_http_server`: that one
answers every path with the metrics and has no place for the health endpoints, and a
WSGI app behind `wsgiref` would add a layer for three fixed paths. The metrics are
encoded by prometheus-client itself (`choose_encoder`: the text format, or OpenMetrics
when Prometheus asks for it). Each request runs on a thread of its own, so a slow
scrape never holds up a health check.

- `/healthz` (liveness): 200 while the process's main loop runs, else 503;
- `/readyz` (readiness): 200 once the process is ready (an engine: every partition
  assigned to it restored; a worker: its task queue partitions assigned), else 503.
"""

from __future__ import annotations

import errno
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

Check = Callable[[], bool]


class MetricsPortError(OSError):
    """The metrics port cannot be listened on (in use, or not ours to bind)."""


class MetricsServer:
    def __init__(self, registry: CollectorRegistry, port: int, *, host: str = "0.0.0.0",
                 live: Check = lambda: True, ready: Check = lambda: True) -> None:
        self.registry = registry
        self.live = live
        self.ready = ready
        try:
            self._server = ThreadingHTTPServer((host, port), _handler_for(self))
        except OSError as exc:
            why = "in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
            raise MetricsPortError(exc.errno, f"metrics port {port} on {host}: {why}; "
                                              f"choose another with --metrics-port (0 = no metrics)") from None
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The port listened on (the one the system chose, for port 0)."""
        return self._server.server_address[1]

    def start(self) -> MetricsServer:
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.5},
                                        name="metrics-http", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(5)
        self._server.server_close()

    def __enter__(self) -> MetricsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _handler_for(server: MetricsServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                encoder, content_type = choose_encoder(self.headers.get("Accept"))
                self._answer(200, encoder(server.registry), content_type)
            elif path in ("/healthz", "/readyz"):
                ok = _safely(server.live if path == "/healthz" else server.ready)
                self._answer(200 if ok else 503, b"ok\n" if ok else b"not ready\n" if path == "/readyz"
                             else b"not live\n")
            else:
                self._answer(404, b"not found: try /metrics, /healthz or /readyz\n")

        def _answer(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args) -> None:  # noqa: A002 - scrapes are not worth a log line
            pass

    return Handler


def _safely(check: Check) -> bool:
    try:
        return bool(check())
    except Exception:  # noqa: BLE001 - a check that fails says "no", it does not break the server
        return False
