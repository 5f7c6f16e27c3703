"""A real Schema Registry for the tests of this folder: Apicurio Registry, installed on first use
(into the user's cache directory) and started once per session on a free port."""

from __future__ import annotations

import socket

import pytest

from streamproc.devenv.schema_registry import LocalSchemaRegistry


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def schema_registry(tmp_path_factory) -> LocalSchemaRegistry:
    registry = LocalSchemaRegistry(port=_free_port(), log_dir=tmp_path_factory.mktemp("schema-registry"))
    registry.start(timeout=180)
    yield registry
    registry.stop()
