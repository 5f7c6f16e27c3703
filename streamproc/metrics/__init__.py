"""Prometheus metrics and health endpoints of engines and workers (`--metrics-port`).

- `batch_tally`: what one engine batch did, counted with plain dict additions while it is
  processed (no metrics library on the hot path);
- `engine_metrics`: the engine's metric families, fed once per committed batch;
- `worker_metrics`: the workers' families (schedule-to-start and workflow task latency,
  consumer lag of each task queue);
- `consumer_lag`: librdkafka's statistics, read for the lag of each task queue partition;
- `http_server`: `/metrics`, `/healthz` and `/readyz` on one port.

Each process builds its own `CollectorRegistry` (never the library's global one), so
several engines and workers in one process (tests, dev mode) do not collide. Every
family is named `streamproc_...`; `docs/metrics.md` lists them.
"""

from streamproc.metrics.engine_metrics import EngineMetrics
from streamproc.metrics.http_server import MetricsPortError, MetricsServer
from streamproc.metrics.worker_metrics import WorkerMetrics

__all__ = ["EngineMetrics", "MetricsPortError", "MetricsServer", "WorkerMetrics"]
