"""`streamproc worker start`: what it refuses before it touches Kafka."""

from __future__ import annotations

from click.testing import CliRunner

from streamproc.cli.main import main

WORKFLOW = "tests.support.crash_workflows:ThreeStepsAndATimer"
ACTIVITY = "tests.support.crash_workflows:crash_step"


def run(*args: str):
    return CliRunner().invoke(main, ["worker", "start", *args], catch_exceptions=False)


def test_a_worker_needs_a_workflow_or_an_activity():
    result = run("q")
    assert result.exit_code == 2
    assert "give at least one --workflow or --activity" in result.output


def test_a_spec_without_a_name_or_naming_nothing_is_refused():
    result = run("q", "--workflow", "tests.support.crash_workflows")
    assert result.exit_code == 2 and "expected module:Class" in result.output
    result = run("q", "--activity", "tests.support.crash_workflows:no_such_step")
    assert result.exit_code == 2 and "cannot load 'tests.support.crash_workflows:no_such_step'" in result.output


def test_undecorated_objects_are_refused_with_the_sdk_message():
    result = run("q", "--workflow", ACTIVITY)
    assert result.exit_code == 2 and "is not a workflow" in result.output
    result = run("q", "--activity", WORKFLOW)
    assert result.exit_code == 2 and "is not an activity" in result.output

