"""The broker's OS process: is a pid alive and really our broker, signals, memory, the tail of its
output files, and the file locks that keep several processes from managing one broker at once.

Linux answers from ``/proc``; elsewhere (macOS) ``ps`` does.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock between processes (e.g. test workers starting the same broker)."""
    import fcntl  # here, not at the top: ensure_broker with a remote broker works without it (Windows)

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def read_pid(pid_file: Path) -> int | None:
    try:
        return int(pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def is_alive(pid: int, child: subprocess.Popen[bytes] | None = None) -> bool:
    """True if process ``pid`` runs.  ``child`` is the Popen of the JVM this process launched, if
    any: polling it reaps our own exited child, which would otherwise linger as a zombie."""
    if child is not None and child.pid == pid:
        return child.poll() is None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, but another user's
        return True
    return not _is_zombie(pid)


def runs_broker_with(pid: int, config_file: Path) -> bool:
    """True if process ``pid`` is a broker JVM started with ``config_file``, so a recycled pid in
    a stale pid file is not mistaken for it.  True too if its command line cannot be read."""
    argv = _process_argv(pid)
    return argv is None or ("kafka.Kafka" in argv and str(config_file) in argv)


def wait_for_exit(pid: int, timeout: float, child: subprocess.Popen[bytes] | None = None) -> bool:
    """Wait up to ``timeout`` s for ``pid`` to exit; False if it still runs."""
    deadline = time.monotonic() + timeout
    while is_alive(pid, child):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def send_signal(pid: int, sig: int) -> None:
    """Signal ``pid``; one that is already gone is no error."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def rss_bytes(pid: int) -> int | None:
    """The resident memory of ``pid`` in bytes, or None if it cannot be read."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        out = subprocess.run(["ps", "-o", "rss=", "-p", str(pid)], capture_output=True, text=True, timeout=5)
        return int(out.stdout.strip()) * 1024
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def tail_lines(path: Path, n: int, since: int = 0) -> list[str]:
    """The last ``n`` lines of a file, looking no further back than byte offset ``since``.

    Reads backwards in growing chunks, so a long log costs only its end.
    """
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            if since > size:  # rolled over since
                since = 0
            chunk = max(4096, n * 256)
            while True:
                start = max(since, size - chunk)
                f.seek(start)
                lines = f.read(size - start).splitlines()
                if start == since or len(lines) > n:
                    break
                chunk *= 2
    except FileNotFoundError:
        return []
    return [line.decode("utf-8", "replace") for line in lines[-n:]] if n > 0 else []


def _process_argv(pid: int) -> list[str] | None:
    """The process' argv ([] if it is gone), or None if it cannot be read."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        return [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]
    except FileNotFoundError:
        if Path("/proc/self").exists():
            return []  # Linux: the process is gone
    except OSError:
        return None
    try:
        out = subprocess.run(["ps", "-o", "command=", "-p", str(pid)], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.split()


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        # the state follows the command name in parentheses, which may itself hold ") "
        return stat[stat.rindex(")") + 2] in "ZX"
    except (OSError, ValueError, IndexError):
        return False
