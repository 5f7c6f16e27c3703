"""One log stream: structlog, pretty on a terminal, JSON lines otherwise (STREAMPROC_LOG_FORMAT
overrides).

Everything a process logs goes through structlog's one writer, which holds a lock per
file, so lines never interleave: our own structlog loggers; the standard library's
`logging` (the local broker's progress, libraries) through `StructlogHandler`; and
librdkafka's lines and error events through `kafka/client_log.py`, which every client
configuration gets as its `logger` and `error_cb` (no raw `%3|...` lines on stderr).
"""

from __future__ import annotations

import logging
import os
import sys

import structlog


def configure_logging(fmt: str | None = None, level: str | None = None, *,
                      route_standard_library: bool = True) -> None:
    fmt = fmt or os.environ.get("STREAMPROC_LOG_FORMAT") or ("console" if sys.stderr.isatty() else "json")
    level_name = (level or os.environ.get("STREAMPROC_LOG_LEVEL") or "info").upper()
    level_number = getattr(logging, level_name, logging.INFO)
    renderer = (structlog.dev.ConsoleRenderer() if fmt == "console"
                else structlog.processors.JSONRenderer())
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level_number),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    if route_standard_library:
        route_standard_logging(level_number)


class StructlogHandler(logging.Handler):
    """A standard-library record as a structlog event: the message is the event, the
    logger's name a field, an exception's traceback kept."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            fields = {"logger": record.name}
            if record.exc_info:
                fields["exc_info"] = record.exc_info
            structlog.get_logger(record.name).log(record.levelno, record.getMessage(), **fields)
        except Exception:  # noqa: BLE001 - logging must never raise into the caller
            self.handleError(record)


def route_standard_logging(level: int = logging.INFO) -> None:
    """Send the standard library's log records (the root logger's) to structlog, once."""
    root = logging.getLogger()
    root.handlers = [h for h in root.handlers if not isinstance(h, StructlogHandler)]
    root.addHandler(StructlogHandler())
    root.setLevel(level)


def ensure_logging_configured() -> None:
    """Configure logging as the CLI does, unless the program configured structlog itself.

    Unconfigured, structlog prints to standard output, where a program's own output goes
    (a worker's lines would mix with what the program prints); our default writes to
    standard error, as the standard library's logging does."""
    if not structlog.is_configured():
        # The program's own standard-library logging is its business: not rerouted.
        configure_logging(route_standard_library=False)
