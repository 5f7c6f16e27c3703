"""docker-compose.yml must only run commands the CLI accepts, with variables it reads.

No Docker engine runs where the tests run, so the file is checked by parsing it and
letting click parse each service's command exactly as the container would.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import click
import pytest
import yaml

from streamproc.cli.main import main
from streamproc.settings import ENVIRONMENT

ROOT = Path(__file__).parents[1]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
OUR_SERVICES = {name: svc for name, svc in COMPOSE["services"].items() if "build" in svc}


def parse_cli(args: list[str]) -> list[str]:
    """Parse a streamproc command line without running it; returns the command path."""
    assert args[0] == "streamproc"
    ctx = main.make_context("streamproc", list(args[1:]))
    path = []
    command, rest = main, ctx.protected_args + ctx.args
    while isinstance(command, click.Group) and rest:
        name, command, rest = command.resolve_command(ctx, rest)
        path.append(name)
        ctx = command.make_context(name, list(rest), parent=ctx)
        rest = ctx.protected_args + ctx.args if isinstance(command, click.Group) else []
    return path


def test_compose_runs_kafka_in_kraft_mode_and_our_engine_and_worker():
    kafka = COMPOSE["services"]["kafka"]
    assert "kafka" in kafka["image"] and kafka["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert set(OUR_SERVICES) == {"engine", "worker", "workflow-worker"}


@pytest.mark.parametrize("service", sorted(OUR_SERVICES))
def test_service_command_is_accepted_by_the_cli(service):
    path = parse_cli(OUR_SERVICES[service]["command"])
    assert path == {"engine": ["engine", "run"], "worker": ["worker", "run"],
                    "workflow-worker": ["worker", "start"]}[service]


def test_the_workflow_worker_runs_definitions_that_import():
    from streamproc.activity.definition import ActivityDefinition
    from streamproc.workflow.definition import WorkflowDefinition

    command = OUR_SERVICES["workflow-worker"]["command"]
    targets = {flag: [command[i + 1] for i, arg in enumerate(command) if arg == flag]
               for flag in ("--workflow", "--activity")}
    assert targets["--workflow"] and targets["--activity"]
    for flag, paths in targets.items():
        for path in paths:
            module, _, name = path.partition(":")
            target = getattr(importlib.import_module(module), name)
            if flag == "--workflow":
                assert WorkflowDefinition.of(target).name == name
            else:
                assert ActivityDefinition.of(target).name == name


@pytest.mark.parametrize("service", sorted(OUR_SERVICES))
def test_service_variables_are_ones_streamproc_reads(service):
    env = OUR_SERVICES[service]["environment"]
    assert set(env) <= set(ENVIRONMENT), set(env) - set(ENVIRONMENT)
    assert env["STREAMPROC_BOOTSTRAP"] == "kafka:9092"


def test_a_wrong_command_would_be_caught():
    with pytest.raises(click.UsageError):
        parse_cli(["streamproc", "engine", "run", "--no-such-flag"])
    with pytest.raises(click.UsageError):
        parse_cli(["streamproc", "engine", "fly"])
