"""Settings from the environment, with the documented defaults when nothing is set."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamproc.settings import ENVIRONMENT, Settings


@pytest.fixture
def clean_env(monkeypatch):
    for name in ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_defaults_when_nothing_is_set(clean_env):
    clean_env.delenv("XDG_STATE_HOME", raising=False)
    s = Settings.from_env()
    assert (s.bootstrap, s.namespace, s.partitions) == ("127.0.0.1:19092", "streamproc", 4)
    assert s.state_dir == Path.home() / ".local" / "state" / "streamproc"
    assert s.engine_id


def test_the_state_dir_honours_xdg_state_home_as_the_broker_does(clean_env, tmp_path):
    from streamproc.devenv.broker_settings import default_state_dir
    clean_env.delenv("STREAMPROC_BROKER_DIR", raising=False)
    clean_env.setenv("XDG_STATE_HOME", str(tmp_path))
    assert Settings.from_env().state_dir == tmp_path / "streamproc"
    assert default_state_dir() == tmp_path / "streamproc" / "kafka"


def test_variables_and_overrides(clean_env):
    clean_env.setenv("STREAMPROC_BOOTSTRAP", "kafka:9092")
    clean_env.setenv("STREAMPROC_NAMESPACE", "prod")
    clean_env.setenv("STREAMPROC_PARTITIONS", "12")
    clean_env.setenv("STREAMPROC_STATE_DIR", "~/engine-state")
    clean_env.setenv("STREAMPROC_ENGINE_ID", "engine-7")
    s = Settings.from_env(namespace="override", partitions=None)
    assert (s.bootstrap, s.namespace, s.partitions, s.engine_id) == ("kafka:9092", "override", 12, "engine-7")
    assert s.state_dir == Path.home() / "engine-state"


@pytest.mark.parametrize("value", ["0", "-1", "many", "9000"])
def test_invalid_partitions_are_refused_with_the_value(clean_env, value):
    clean_env.setenv("STREAMPROC_PARTITIONS", value)
    with pytest.raises(ValueError, match=f"STREAMPROC_PARTITIONS must be an integer in \\[1, 8192\\], got '{value}'"):
        Settings.from_env()


def test_engine_id_with_the_turn_separator_is_refused(clean_env):
    # "a#2" would share a transactional id with the second producer of engine "a".
    clean_env.setenv("STREAMPROC_ENGINE_ID", "a#2")
    with pytest.raises(ValueError, match="STREAMPROC_ENGINE_ID must not contain '#', got 'a#2'"):
        Settings.from_env()
