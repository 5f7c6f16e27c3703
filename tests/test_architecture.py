"""The layers, checked from the source: a pure core inside a thin Kafka shell, no cycles.

The core (processors, state, due dates, semantics, protocol) never imports the Kafka
shell (`streamproc.kafka`) or the Kafka client: it is what the processor tests drive
without a broker. Within the engine, jobs and activities know nothing of workflows: a
workflow builds on them (an activity reports to its owner through an injected strategy).
"""

from __future__ import annotations

from pathlib import Path

import streamproc
from tests.support.import_graph import cycles, external_imports, import_graph

PACKAGE = Path(streamproc.__file__).parent
CORE = ("streamproc.engine", "streamproc.state", "streamproc.due", "streamproc.semantics", "streamproc.protocol")


def _in(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def test_no_module_imports_itself_back_through_others():
    assert cycles(import_graph(PACKAGE)) == []


def test_the_core_never_imports_the_kafka_shell_or_client():
    graph = import_graph(PACKAGE)
    external = external_imports(PACKAGE)
    offending = sorted(f"{m} -> {t}" for m, targets in graph.items() if _in(m, CORE)
                       for t in targets if _in(t, ("streamproc.kafka",)))
    offending += sorted(f"{m} -> confluent_kafka" for m, names in external.items()
                        if _in(m, CORE) and "confluent_kafka" in names)
    assert offending == []


def test_jobs_and_activities_know_nothing_of_workflows():
    graph = import_graph(PACKAGE)
    lower = ("streamproc.engine.jobs", "streamproc.engine.activities")
    offending = sorted(f"{m} -> {t}" for m, targets in graph.items() if _in(m, lower)
                       for t in targets if _in(t, ("streamproc.engine.workflows",)))
    assert offending == []


def test_the_graph_sees_what_it_checks():
    """The checks above would pass on an empty graph: make sure it is not one."""
    graph = import_graph(PACKAGE)
    assert "streamproc.kafka.engine" in graph["streamproc.cli.main"] or any(
        t.startswith("streamproc.kafka") for t in graph["streamproc.cli.main"])
    assert "streamproc.engine.activities.processors" in graph["streamproc.engine.workflows.activities"]
    assert cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]
