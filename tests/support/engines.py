"""Engines and workers for end-to-end tests: in a thread of the test, or as real processes."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from streamproc.kafka.engine import Engine


class EngineThread:
    """An engine in a thread of the test process (for a manual clock)."""

    def __init__(self, settings, **kwargs) -> None:
        self.engine = Engine(settings, **kwargs)
        self.thread = threading.Thread(target=self.engine.run, daemon=True)

    @classmethod
    def on(cls, bootstrap: str, namespace: str, state_dir: Path, engine_id: str, *, partitions: int = 2,
           idle_poll_ms: int = 10, **kwargs) -> EngineThread:
        """An engine of `partitions` partitions that polls often (tests wait on it)."""
        from streamproc.settings import Settings

        settings = Settings(bootstrap=bootstrap, namespace=namespace, partitions=partitions, state_dir=state_dir,
                            engine_id=engine_id)
        return cls(settings, idle_poll_ms=idle_poll_ms, **kwargs)

    def __enter__(self) -> Engine:
        self.thread.start()
        if not self.engine.ready.wait(60):
            raise TimeoutError("engine got no partitions within 60 s")
        return self.engine

    def __exit__(self, *exc) -> None:
        self.engine.stop()
        self.thread.join(30)


@contextlib.contextmanager
def workflow_setup(bootstrap: str, namespace: str, state_dir: Path, queue: str, workflows: list, *,
                   partitions: int = 2, name: str = "e2e"):
    """An engine (manual clock) in a thread, a client, and a Worker for `workflows` on `queue`;
    yields the client."""
    from streamproc.client import Client
    from streamproc.clock import ManualClock
    from streamproc.worker import Worker

    with EngineThread.on(bootstrap, namespace, state_dir, name, partitions=partitions, clock=ManualClock()), Client(bootstrap, namespace) as client, \
            Worker(client, task_queue=queue, workflows=workflows, identity=f"{name}-worker"):
        yield client


def _env(bootstrap: str, namespace: str, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(STREAMPROC_BOOTSTRAP=bootstrap, STREAMPROC_NAMESPACE=namespace,
               STREAMPROC_LOG_FORMAT="json", PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


class Process:
    """A `python -m streamproc ...` child process with its log in a file."""

    def __init__(self, args: list[str], env: dict[str, str], log_path: Path) -> None:
        self.args = args
        self.env = env
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None

    def start(self) -> Process:
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "streamproc", *self.args], env=self.env,
                                     stdout=log, stderr=subprocess.STDOUT, cwd=Path(__file__).parents[2])
        return self

    def kill(self) -> None:
        """SIGKILL: no clean shutdown, no flush, no leaving the group."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()

    def wait_exit(self, timeout: float) -> int:
        """The exit code; a process still running after `timeout` is killed and the test fails."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"still running after {timeout} s:\n{self.log_text()[-2000:]}") from None

    def dump_stacks(self) -> None:
        """Every thread's stack into the log (the CLI registers SIGUSR1 with faulthandler)."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGUSR1)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def wait_for_log(self, needle: str, timeout: float = 60, since: int = 0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.log_text()[since:]:
                return
            if not self.alive():
                raise RuntimeError(f"process exited ({self.proc.returncode}):\n{self.log_text()[-3000:]}")
            time.sleep(0.05)
        raise TimeoutError(f"{needle!r} not in the log within {timeout} s:\n{self.log_text()[-3000:]}")


def with_process_logs(processes, what=lambda: "") -> contextlib.AbstractContextManager:
    """A context in which a TimeoutError is raised again with `what()` and the stacks and log
    tails of `processes` (those alive dump their threads' stacks first): a test that times
    out says which process stopped doing what."""
    @contextlib.contextmanager
    def explaining():
        try:
            yield
        except TimeoutError as exc:
            for p in processes:
                if p.alive():
                    p.dump_stacks()
            time.sleep(2)
            tails = "\n".join(f"--- {p.log_path.name} (alive: {p.alive()}):\n{p.log_text()[-12000:]}"
                              for p in processes)
            raise TimeoutError(f"{exc}{what()}\n{tails}") from None
    return explaining()


def engine_process(bootstrap: str, namespace: str, engine_id: str, state_dir: Path,
                   log_dir: Path, partitions: int = 4, options: tuple[str, ...] = ()) -> Process:
    """`streamproc engine run` with more `options`."""
    env = _env(bootstrap, namespace, STREAMPROC_ENGINE_ID=engine_id,
               STREAMPROC_STATE_DIR=str(state_dir), STREAMPROC_PARTITIONS=str(partitions))
    return Process(["engine", "run", *options], env, log_dir / f"engine-{engine_id}.log")


def worker_process(bootstrap: str, namespace: str, queue: str, worker_id: str, log_dir: Path,
                   handler: str = "tests.support.handlers:double", options: tuple[str, ...] = (),
                   **env: str) -> Process:
    """`streamproc worker run` (a job worker) with more `options` and environment variables."""
    return Process(["worker", "run", queue, "--handler", handler, "--worker-id", worker_id, *options],
                   _env(bootstrap, namespace, **env), log_dir / f"worker-{worker_id}.log")


def combined_worker_process(bootstrap: str, namespace: str, queue: str, worker_id: str, log_dir: Path, *,
                            workflows: list[str] = (), activities: list[str] = (), options: tuple[str, ...] = (),
                            **env: str) -> Process:
    """`streamproc worker start`: workflows and activities (module:name specs) of `queue`, more `options`."""
    specs = [*(a for w in workflows for a in ("--workflow", w)), *(a for f in activities for a in ("--activity", f))]
    return Process(["worker", "start", queue, "--identity", worker_id, *specs, *options],
                   _env(bootstrap, namespace, **env),
                   log_dir / f"worker-{worker_id}.log")
