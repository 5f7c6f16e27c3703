"""Is the broker answering? A fault test's own view of it, apart from the processes under test.

Twice a second a fresh connection sends the broker an ApiVersions request (the first thing
every client sends) and waits a second for the answer. A broker that takes the connection
and does not answer is stalled (its JVM stopped, frozen by the test, or starved by its
host); one that refuses it is down. The fault tests bound the engine's recovery from the
moment the broker answers again: a broker that stalls for half a minute after a restart
(seen in CI) is the machine's doing, and the time the engine takes is what is tested.

While the broker is stalled, one snapshot of its JVM's threads (state, and what a thread in
an uninterruptible wait waits on) and of the kernel's dirty page counts is kept, so that a
failure says what the broker was doing.
"""

from __future__ import annotations

import collections
import socket
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path

#: A silence this long is reported, with a snapshot of the broker's process.
STALL_REPORT_S = 3.0


def api_versions_answered(host: str, port: int, timeout: float) -> bool | None:
    """True if the broker answered an ApiVersions request within `timeout`, False if it took
    the connection and did not, None if nothing took the connection (down)."""
    client_id = b"pulse"
    # ApiVersions (key 18) v0: request header v1 (api key, version, correlation id, client id)
    body = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id
    try:
        conn = socket.create_connection((host, port), timeout=timeout)
    except ConnectionRefusedError:
        return None
    except OSError:  # a stalled broker's full accept queue: the connection times out
        return False
    try:
        conn.settimeout(timeout)
        conn.sendall(struct.pack(">i", len(body)) + body)
        return len(conn.recv(8)) > 0
    except OSError:
        return False
    finally:
        conn.close()


class BrokerPulse:
    """Watches one broker: since when it answers, and the stalls it had (see the module)."""

    def __init__(self, host: str, port: int, pid: Callable[[], int | None]) -> None:
        self.host, self.port = host, port
        self._pid = pid
        #: monotonic time since when the broker answers without a break, None while it does not
        self.answering_since: float | None = time.monotonic()
        #: stalls of STALL_REPORT_S or more: (wall-clock start, seconds, snapshot)
        self.stalls: list[tuple[str, float, str]] = []
        self._silent_since: float | None = None
        self._snapshot = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="broker-pulse", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            answered = api_versions_answered(self.host, self.port, timeout=1.0)
            now = time.monotonic()
            if answered:
                if self._silent_since is not None:
                    self._end_silence(now)
                if self.answering_since is None:
                    self.answering_since = now
                continue
            self.answering_since = None
            if answered is None:  # down: a restart, not a stall
                self._silent_since, self._snapshot = None, ""
                continue
            if self._silent_since is None:
                self._silent_since = now
            elif not self._snapshot and now - self._silent_since >= STALL_REPORT_S:
                self._snapshot = process_snapshot(self._pid())

    def _end_silence(self, now: float) -> None:
        seconds = now - self._silent_since
        if seconds >= STALL_REPORT_S:
            began = time.strftime("%H:%M:%S", time.gmtime(time.time() - (now - self._silent_since)))
            self.stalls.append((began, round(seconds, 1), self._snapshot))
        self._silent_since, self._snapshot = None, ""

    def describe_stalls(self) -> str:
        return "; ".join(f"{began} for {seconds} s [{snapshot}]" for began, seconds, snapshot in self.stalls)


def process_snapshot(pid: int | None) -> str:
    """The threads of `pid` by state (with the kernel function a thread in D waits in), and
    the machine's dirty and writeback memory: enough to tell a stopped, starved, or
    disk-bound JVM apart."""
    if pid is None:
        return "no pid"
    states: collections.Counter[str] = collections.Counter()
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                stat = (task / "stat").read_text()
                state = stat[stat.rindex(")") + 2]
                if state == "D":
                    state += ":" + (task / "wchan").read_text()
            except (OSError, ValueError):
                continue
            states[state] += 1
    except OSError as exc:
        return f"pid {pid}: {exc}"
    memory = {}
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("Dirty", "Writeback"):
                memory[key] = value.strip()
    except OSError:
        pass
    return f"threads by state {dict(states)}, {memory}"
