"""structlog setup: pretty on a terminal, JSON lines otherwise (STREAMPROC_LOG_FORMAT overrides)."""

from __future__ import annotations

import logging
import os
import sys

import structlog


def configure_logging(fmt: str | None = None, level: str | None = None) -> None:
    fmt = fmt or os.environ.get("STREAMPROC_LOG_FORMAT") or ("console" if sys.stderr.isatty() else "json")
    level_name = (level or os.environ.get("STREAMPROC_LOG_LEVEL") or "info").upper()
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
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level_name, logging.INFO)),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )


def ensure_logging_configured() -> None:
    """Configure logging as the CLI does, unless the program configured structlog itself.

    Unconfigured, structlog prints to standard output, where a program's own output goes
    (a worker's lines would mix with what the program prints); our default writes to
    standard error, as the standard library's logging does."""
    if not structlog.is_configured():
        configure_logging()
