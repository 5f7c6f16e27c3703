"""Every CLI error is one line and exit code 1 or 2, never a traceback: a bad flag, a broker
that does not answer, a port in use, a handler module that is not there."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Nothing listens on port 1 of the loopback: a broker that is down.
DOWN = "127.0.0.1:1"


def streamproc(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
               timeout: float = 60) -> subprocess.CompletedProcess:
    """`streamproc ARGS` as a console script runs it: its own process, the project on the
    path but not the current directory."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    environment.pop("STREAMPROC_TRACEBACK", None)
    code = "import sys; sys.path = [p for p in sys.path if p not in ('', '.')]; " \
           "from streamproc.cli.main import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd or ROOT, env=environment,
                          capture_output=True, text=True, timeout=timeout)


def assert_one_line_error(result: subprocess.CompletedProcess, code: int, says: str) -> None:
    output = result.stdout + result.stderr
    assert result.returncode == code, output
    assert "Traceback" not in output, output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and says in errors[0], output


@pytest.mark.parametrize("args", [
    ["job", "create", "q", "--retries", "many"],       # not a number
    ["job", "create", "q", "--timeout", "1x"],          # not a duration
    ["workflow", "start", "--type", "T", "-t", "q", "-w", "w", "--run-timeout", "soon"],
    ["no-such-command"],
    ["job", "create"],                                  # a missing argument
    ["engine", "run", "--commit-interval-ms", "-3"],    # out of range
])
def test_a_bad_flag_is_a_usage_error(args):
    result = streamproc(*args)
    assert_one_line_error(result, 2, "")


@pytest.mark.parametrize("args", [
    ["job", "create", "q"],
    ["job", "complete", "1", "1"],
    ["events", "tail"],
    ["workflow", "describe", "-w", "order-1"],
    ["workflow", "list"],
    ["schedule", "list"],
    ["topics", "create"],
    ["worker", "run", "q"],
])
def test_a_broker_that_does_not_answer_is_one_line_after_a_bounded_wait(args):
    started = time.monotonic()
    result = streamproc("--bootstrap", DOWN, "--connect-timeout", "2s", *args)
    assert_one_line_error(result, 1, f"no Kafka broker answers at {DOWN} (waited 2 s)")
    assert time.monotonic() - started < 20


def test_a_handler_module_that_is_missing_is_named(tmp_path):
    result = streamproc("worker", "run", "payments", "--handler", "mymodule:charge", cwd=tmp_path)
    assert_one_line_error(result, 2, "cannot load 'mymodule:charge': No module named 'mymodule'")


def test_a_handler_module_in_the_current_directory_is_found(tmp_path):
    (tmp_path / "mymodule.py").write_text("def charge(job):\n    return {'charged': True}\n")
    result = streamproc("--bootstrap", DOWN, "--connect-timeout", "1s", "worker", "run", "payments",
                        "--handler", "mymodule:charge", cwd=tmp_path)
    # loaded: the worker got as far as looking for the broker
    assert_one_line_error(result, 1, "no Kafka broker answers")
    (tmp_path / "mymodule.py").write_text("def other(job):\n    return None\n")
    result = streamproc("worker", "run", "payments", "--handler", "mymodule:charge", cwd=tmp_path)
    assert_one_line_error(result, 2, "has no attribute 'charge'")


def test_a_port_in_use_is_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = streamproc("broker", "start", env={"STREAMPROC_BROKER_PORT": str(port),
                                                    "STREAMPROC_BROKER_DIR": str(tmp_path / "kafka")})
    assert_one_line_error(result, 1, f"client port 127.0.0.1:{port} is already in use")


def test_a_bad_setting_is_one_line():
    result = streamproc("--bootstrap", DOWN, "topics", "create", env={"STREAMPROC_PARTITIONS": "many"})
    assert_one_line_error(result, 1, "STREAMPROC_PARTITIONS must be an integer in [1, 8192], got 'many'")


def test_version():
    result = streamproc("--version")
    assert result.returncode == 0 and result.stdout.startswith("streamproc, version ")


def test_the_boundary_turns_any_error_into_one_line():
    import errno

    import click
    from click.testing import CliRunner

    from streamproc.cli.errors import StreamprocGroup

    raised: list[BaseException] = []

    @click.group(cls=StreamprocGroup)
    def root() -> None:
        pass

    @root.command()
    def boom() -> None:
        raise raised[-1]

    for error, says in [(OSError(errno.EADDRINUSE, "Address already in use"), "address already in use"),
                        (KeyError("surprise"), "KeyError: 'surprise' (STREAMPROC_TRACEBACK=1 shows where)"),
                        (RuntimeError("two\nlines"), "RuntimeError: two lines")]:
        raised.append(error)
        result = CliRunner().invoke(root, ["boom"])
        assert result.exit_code == 1 and "Traceback" not in result.output
        assert result.output.count("\n") == 1 and says in result.output, result.output
