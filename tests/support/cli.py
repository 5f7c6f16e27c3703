"""Run `streamproc` commands in this process against a real broker, as the CLI tests do."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from click.testing import CliRunner

from streamproc.cli.main import main
from streamproc.settings import Settings


def cli_of(group: str) -> Callable[..., str]:
    """`run(*args, code=0)`: `streamproc <group> *args`, asserting its exit code; returns
    stdout on success (log lines of engine and worker threads in this process go to the
    stderr the command's logging was configured with, which would spoil a JSON document),
    everything it printed otherwise."""
    runner = CliRunner()

    def run(*args: str, code: int = 0) -> str:
        result = runner.invoke(main, [group, *args], catch_exceptions=False)
        assert result.exit_code == code, result.output
        return result.stdout if code == 0 else result.output

    return run


def cli_settings(bootstrap: str, namespace: str, tmp_path, monkeypatch: pytest.MonkeyPatch,
                 engine_id: str) -> Settings:
    """The environment a CLI command reads, and the settings of the engine it talks to."""
    monkeypatch.setenv("STREAMPROC_BOOTSTRAP", bootstrap)
    monkeypatch.setenv("STREAMPROC_NAMESPACE", namespace)
    return Settings(bootstrap=bootstrap, namespace=namespace, partitions=2, state_dir=tmp_path,
                    engine_id=engine_id)
