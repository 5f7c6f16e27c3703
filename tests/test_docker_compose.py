"""docker-compose.yml must only run commands the CLI accepts, with variables it reads.

No Docker engine runs where the tests run, so the file is checked by parsing it and
letting click parse each service's command exactly as the container would.
"""

from __future__ import annotations

import importlib
import json
import re
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


def _metrics_port(service: dict) -> int:
    command = service["command"]
    return int(command[command.index("--metrics-port") + 1])


@pytest.mark.parametrize("service", sorted(OUR_SERVICES))
def test_service_serves_metrics_publishes_them_and_is_health_checked(service):
    svc = OUR_SERVICES[service]
    port = _metrics_port(svc)
    assert port > 0
    assert any(mapping.endswith(f":{port}") for mapping in svc["ports"]), svc["ports"]
    check = " ".join(svc["healthcheck"]["test"])
    assert f"http://localhost:{port}/healthz" in check


def test_the_broker_is_published_where_the_host_cli_looks_by_default():
    from streamproc.settings import DEFAULT_BOOTSTRAP

    kafka = COMPOSE["services"]["kafka"]
    port = DEFAULT_BOOTSTRAP.rsplit(":", 1)[1]
    assert f"{port}:{port}" in kafka["ports"]
    assert f"localhost:{port}" in kafka["environment"]["KAFKA_ADVERTISED_LISTENERS"]


def _mounted(service: str, target_dir: str) -> Path:
    """The repository path the compose file mounts at `target_dir` (or a file under it) in `service`."""
    for volume in COMPOSE["services"][service]["volumes"]:
        source, target = volume.split(":")[:2]
        if target == target_dir:
            path = ROOT / source
            assert path.exists(), path
            return path
    raise AssertionError(f"{service} mounts nothing at {target_dir}")


def test_prometheus_scrapes_every_service_at_its_metrics_port():
    config = yaml.safe_load(_mounted("prometheus", "/etc/prometheus/prometheus.yml").read_text())
    targets = {t for job in config["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]}
    assert targets == {f"{name}:{_metrics_port(svc)}" for name, svc in OUR_SERVICES.items()}


def _families() -> list:
    """The metric families of an engine and of workers."""
    from prometheus_client import CollectorRegistry

    from streamproc.metrics import EngineMetrics, WorkerMetrics

    registry = CollectorRegistry()
    EngineMetrics(registry)
    WorkerMetrics(registry)
    return list(registry.collect())


def _defined_metric_names() -> set[str]:
    """Every sample name the engine and workers can expose (histograms' _bucket... included)."""
    names = set()
    for family in _families():
        names |= {family.name, f"{family.name}_total", f"{family.name}_bucket", f"{family.name}_sum",
                  f"{family.name}_count"}
    return names


def test_grafana_is_provisioned_with_prometheus_and_a_dashboard_of_our_metrics():
    provisioning = _mounted("grafana", "/etc/grafana/provisioning")
    sources = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())["datasources"]
    assert [(s["type"], s["url"]) for s in sources] == [("prometheus", "http://prometheus:9090")]
    providers = yaml.safe_load((provisioning / "dashboards" / "streamproc.yml").read_text())["providers"]
    assert [p["options"]["path"] for p in providers] == ["/var/lib/grafana/dashboards"]

    dashboards = list(_mounted("grafana", "/var/lib/grafana/dashboards").glob("*.json"))
    assert len(dashboards) == 1
    dashboard = json.loads(dashboards[0].read_text())
    expressions = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    used = {name for expr in expressions for name in re.findall(r"\bstreamproc_[a-z_]+", expr)}
    defined = _defined_metric_names()
    assert used - defined == set()
    shown = {n.removesuffix("_bucket").removesuffix("_sum").removesuffix("_count").removesuffix("_total") for n in used}
    assert shown >= {f.name for f in _families()}  # every family has a panel
    assert {t["datasource"]["uid"] for panel in dashboard["panels"] for t in panel["targets"]} == {
        s["uid"] for s in sources}

