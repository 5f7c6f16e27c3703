"""librdkafka's own log lines and error events, through structlog, one line per interval.

While a broker is away every client of a process reports each failed connection attempt
(with `reconnect.backoff.max.ms` at 1 s, one a second per client and broker address)
and an `_ALL_BROKERS_DOWN` / `_TRANSPORT` error event with it: thousands of lines in an
outage, saying one thing. Here each kind of line (librdkafka's facility, or an error
code) is logged at most once per interval, with the number of lines it stands for; a
different kind of error still shows at once. Errors stay visible: warnings and errors of
the library are kept, its informational lines dropped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import structlog
from confluent_kafka import KafkaError

log = structlog.get_logger("streamproc.kafka")

#: Seconds between two lines of one kind.
DEFAULT_INTERVAL_S = 30.0


class ClientLog:
    """Give as `logger` and `error_cb` of a client configuration (see `config()`); the
    callbacks run on the thread that polls the client."""

    def __init__(self, role: str, interval_s: float = DEFAULT_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.role = role
        self.interval_s = interval_s
        self._clock = clock
        self._lock = threading.Lock()
        #: kind -> (when last logged, lines suppressed since)
        self._last: dict[str, tuple[float, int]] = {}

    def config(self, on_fatal: Callable[[KafkaError], None] | None = None,
               on_all_brokers_down: Callable[[], None] | None = None) -> dict:
        """`on_fatal(error)`: the client is dead (the error event's code is `_FATAL`; the
        Python error object does not carry the flag). `on_all_brokers_down()`: the client
        lost every broker connection."""
        def error_cb(error: KafkaError) -> None:
            code = error.code()
            if (code == KafkaError._FATAL or error.fatal()) and on_fatal is not None:
                on_fatal(error)
            elif code == KafkaError._ALL_BROKERS_DOWN and on_all_brokers_down is not None:
                on_all_brokers_down()
            self.error(error)
        return {"logger": self, "error_cb": error_cb}

    def due(self, kind: str) -> int | None:
        """None if a line of `kind` was logged less than an interval ago (it is counted),
        else the number of lines suppressed since the last one (the caller logs now)."""
        now = self._clock()
        with self._lock:
            last, suppressed = self._last.get(kind, (None, 0))
            if last is not None and now - last < self.interval_s:
                self._last[kind] = (last, suppressed + 1)
                return None
            self._last[kind] = (now, 0)
            return suppressed

    # librdkafka calls logger.log(level, "%s [%s] %s", facility, client name, message)
    def log(self, level: int, fmt: str, *args) -> None:
        if level < logging.WARNING:
            return
        facility = args[0] if args else "?"
        suppressed = self.due(f"log:{facility}")
        if suppressed is not None:
            text = fmt % args if args else fmt
            log.warning("kafka_client_log", client=self.role, line=text, suppressed=suppressed)

    def error(self, error: KafkaError) -> None:
        suppressed = self.due(f"error:{error.code()}")
        if suppressed is not None:
            log.warning("kafka_client_error", client=self.role, error=f"{error.name()}: {error.str()}",
                        fatal=error.fatal(), suppressed=suppressed)
